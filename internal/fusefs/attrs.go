package fusefs

import (
	"sync"
	"time"
)

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
// It also bounds the size the kernel may hold for the file (sizeBound):
// the kernel drops the attributes of a reply to a request it sent before
// an invalidation of the inode (FUSE_NOTIFY_INVAL_INODE, sent by the
// change feed and by opens) reached it, and then keeps its older size.
// Such a reply's size cannot be trusted to have replaced the one before,
// so the bound only rises, until a reply far enough from any invalidation
// (quietAfter), a setattr's (which the kernel always applies) or the
// kernel forgetting the inode lowers it. An open that finds the file
// smaller than the bound reads it around the kernel's page cache
// (openCaching): a kernel that believes the file larger would otherwise
// serve zeros or old bytes past the end another client cut.
//
// It is sharded by inode so that parallel lookups do not serialize on one
// lock. It is safe for concurrent use.
type kernelStamps struct {
	shards [stampShards]stampShard
}

const stampShards = 64

// quietAfter is how long after an invalidation of an inode a reply's size
// is trusted to be the kernel's: longer than a request waits in the
// kernel's queue before the mount reads it, on a loaded machine.
const quietAfter = 2 * time.Second

type kstate struct {
	st       stamp
	told     bool   // st is what the kernel was last told
	bound    uint64 // the largest size the kernel may hold
	notified int64  // when the mount last invalidated the kernel's attributes (Unix ns)
	// feedEpoch and feedCursor: an open invalidated the kernel's
	// attributes after reading ones that reflect every change of the
	// change feed's epoch before the cursor (fresh).
	feedEpoch, feedCursor uint64
}

type stampShard struct {
	mu sync.Mutex
	m  map[uint64]kstate // guarded by mu
}

func (k *kernelStamps) shard(ino uint64) *stampShard { return &k.shards[ino%stampShards] }

// setLocked stores ks for ino; s.mu is held.
func (s *stampShard) setLocked(ino uint64, ks kstate) {
	if s.m == nil || len(s.m) >= maxSeen/stampShards {
		s.m = make(map[uint64]kstate) // full: forgetting costs requests only
	}
	s.m[ino] = ks
}

// update applies fn to ino's state, creating it if missing. s.mu is held
// while fn runs.
func (k *kernelStamps) update(ino uint64, fn func(*kstate)) {
	s := k.shard(ino)
	s.mu.Lock()
	ks := s.m[ino]
	fn(&ks)
	s.setLocked(ino, ks)
	s.mu.Unlock()
}

// put records that the kernel was given st for ino at now, in a reply
// the kernel applies unless an invalidation crossed it (certain: a
// setattr's, which it always applies).
func (k *kernelStamps) put(ino uint64, st stamp, now time.Time, certain bool) {
	k.update(ino, func(ks *kstate) {
		ks.st, ks.told = st, true
		if certain || now.UnixNano()-ks.notified > int64(quietAfter) {
			ks.bound = st.size
		} else {
			ks.bound = max(ks.bound, st.size)
		}
	})
}

// get returns what the table knows of ino: ok is false if nothing.
func (k *kernelStamps) get(ino uint64) (ks kstate, ok bool) {
	s := k.shard(ino)
	s.mu.Lock()
	ks, ok = s.m[ino]
	s.mu.Unlock()
	return ks, ok
}

// toldOf reports whether the kernel was last given st.
func (ks kstate) toldOf(st stamp) bool { return ks.told && ks.st == st }

// grew records that the kernel's size of ino may have grown to end (a
// write through the mount: the kernel moves its size itself).
func (k *kernelStamps) grew(ino uint64, end uint64) {
	s := k.shard(ino)
	s.mu.Lock()
	if ks, ok := s.m[ino]; !ok || ks.bound < end {
		ks.bound = end
		s.setLocked(ino, ks)
	}
	s.mu.Unlock()
}

// invalidated records that the mount told the kernel to drop its
// attributes of ino at now: what it was told is no longer what it has,
// and replies crossing the invalidation may be dropped.
func (k *kernelStamps) invalidated(ino uint64, now time.Time) {
	s := k.shard(ino)
	s.mu.Lock()
	if ks, ok := s.m[ino]; ok {
		ks.told, ks.notified = false, now.UnixNano()
		s.m[ino] = ks
	}
	s.mu.Unlock()
}

// fresh records that the mount invalidated the kernel's attributes of ino
// after reading attributes that reflect every change of feed epoch epoch
// before cursor (an open, OpenAttrIno): whatever the kernel asks for after
// that is at least as new, so the feed need not invalidate them again for
// those changes (covers). An invalidation the feed sends anyway could
// cross the kernel's next GETATTR, whose reply the kernel then drops
// (kernelStamps), keeping a size from before the open: a read right
// after the open would stop at the old end of a file that grew.
func (k *kernelStamps) fresh(ino, epoch, cursor uint64) {
	if epoch == 0 {
		return
	}
	k.update(ino, func(ks *kstate) {
		if ks.feedEpoch != epoch || ks.feedCursor < cursor {
			ks.feedEpoch, ks.feedCursor = epoch, cursor
		}
	})
}

// covers reports whether the kernel's attributes of ino are known to
// reflect every change of feed epoch epoch before cursor (fresh).
func (k *kernelStamps) covers(ino, epoch, cursor uint64) bool {
	ks, ok := k.get(ino)
	return ok && epoch != 0 && ks.feedEpoch == epoch && cursor <= ks.feedCursor
}

// drop forgets ino: the kernel dropped its inode (FORGET).
func (k *kernelStamps) drop(ino uint64) {
	s := k.shard(ino)
	s.mu.Lock()
	delete(s.m, ino)
	s.mu.Unlock()
}

// openCaching decides how an open serves the kernel's page cache, from
// whether the file is unchanged since this mount last opened it (keep),
// whether the open created it, the size the open found, and the bound on
// the size the kernel may hold (known false: no bound). It returns
// whether to keep the cached pages, to tell the kernel to drop its
// attributes (they may predate the change), and to read and write this
// open around the page cache (direct): the kernel may believe the file
// larger than it is, and a cached read would then return bytes past its
// end.
func openCaching(keep, created, told bool, size, bound uint64, known bool) (keepPages, notify, direct bool) {
	switch {
	case keep:
		return true, false, false
	case created:
		return false, false, false
	}
	return false, !told, !known || size < bound
}
