package fusefs

import "sync"

// kernelStamps remembers, for each regular file, the mtime and size this
// mount last gave the kernel in a reply (lookup, getattr, setattr, create,
// a READDIRPLUS entry). An open that finds the same mtime and size at the
// metadata service then knows the kernel's cached attributes are current
// and need not be dropped, which would cost another request (the kernel
// asks for them again at the next fstat or read near the end of the file).
//
// The kernel keeps the reply of the request sent last when replies cross
// (its attr_version), while this table keeps the one recorded last; they
// differ only for two requests on one inode in flight at once, and then
// the table can only be wrong if the file's mtime and size went back to
// earlier values in between. A missing entry only costs the request.
//
// It is sharded by inode so that parallel lookups do not serialize on one
// lock. It is safe for concurrent use.
type kernelStamps struct {
	shards [stampShards]stampShard
}

const stampShards = 64

type stampShard struct {
	mu sync.Mutex
	m  map[uint64]stamp // guarded by mu
}

func (k *kernelStamps) shard(ino uint64) *stampShard { return &k.shards[ino%stampShards] }

// put records that the kernel was given st for ino.
func (k *kernelStamps) put(ino uint64, st stamp) {
	s := k.shard(ino)
	s.mu.Lock()
	if s.m == nil || len(s.m) >= maxSeen/stampShards {
		s.m = make(map[uint64]stamp) // full: forgetting costs requests only
	}
	s.m[ino] = st
	s.mu.Unlock()
}

// has reports whether the kernel was last given st for ino.
func (k *kernelStamps) has(ino uint64, st stamp) bool {
	s := k.shard(ino)
	s.mu.Lock()
	got, ok := s.m[ino]
	s.mu.Unlock()
	return ok && got == st
}

// drop forgets ino: the kernel dropped its attributes or its inode.
func (k *kernelStamps) drop(ino uint64) {
	s := k.shard(ino)
	s.mu.Lock()
	delete(s.m, ino)
	s.mu.Unlock()
}
