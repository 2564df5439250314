package fusefs

import (
	"sync"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// dirAttrs holds, for directories this mount just changed an entry in
// (create, mkdir, unlink, rmdir), their attributes as the metadata service
// left them, sent with the reply (client.OnDirChange). The kernel drops a
// directory's cached attributes after every entry change in it and, with
// default_permissions, asks for them again at the next path walk: that
// getattr is answered from here instead of from the metadata service.
//
// An entry answers every getattr while it is younger than the attribute
// timeout (with several programs changing one directory the kernel asks
// more than once per change: each path walk's permission check after
// another's change); each reply's own timeout is cut by the entry's age,
// so the kernel never holds the attributes longer after the change than it
// would have after a getattr at the time of the change
// (docs/adr/0014-mount-caches.md states the bound). Changes made through this mount that the replies do
// not describe (chmod, xattrs, rename, link, symlink) drop the entries
// they may make stale. Of two replies for one directory the one with the
// later ctime is kept, whatever order they arrive in.
//
// It is safe for concurrent use.
type dirAttrs struct {
	mu sync.Mutex
	m  map[uint64]dirAttr // guarded by mu
}

type dirAttr struct {
	a  client.InodeAttr
	at time.Time
}

// maxDirAttrs bounds dirAttrs; when full it is cleared, which costs a
// getattr per directory only.
const maxDirAttrs = 4096

func (d *dirAttrs) put(a client.InodeAttr, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.m[a.Ino]; ok && old.a.Ctime > a.Ctime {
		return
	}
	if d.m == nil || len(d.m) >= maxDirAttrs {
		d.m = make(map[uint64]dirAttr)
	}
	d.m[a.Ino] = dirAttr{a, now}
}

// get returns ino's attributes if they are younger than ttl, with the time
// left of ttl. An entry too old is removed.
func (d *dirAttrs) get(ino uint64, ttl time.Duration, now time.Time) (client.InodeAttr, time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[ino]
	if !ok {
		return client.InodeAttr{}, 0, false
	}
	left := ttl - now.Sub(e.at)
	if left <= 0 {
		delete(d.m, ino)
		return client.InodeAttr{}, 0, false
	}
	return e.a, left, true
}

// drop forgets the given directories.
func (d *dirAttrs) drop(inos ...uint64) {
	d.mu.Lock()
	for _, ino := range inos {
		delete(d.m, ino)
	}
	d.mu.Unlock()
}

// changingDirs forgets the cached attributes of directories before and
// after an operation that changes them without sending their new ones:
//
//	defer fs.changingDirs(ino)()
func (fs *fileSystem) changingDirs(inos ...uint64) func() {
	fs.dirs.drop(inos...)
	return func() { fs.dirs.drop(inos...) }
}

// clear forgets every directory.
func (d *dirAttrs) clear() {
	d.mu.Lock()
	d.m = nil
	d.mu.Unlock()
}
