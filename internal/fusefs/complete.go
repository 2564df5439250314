package fusefs

import "sync"

// Directories this mount made itself hold, when made, no name at all, and
// every name added to or removed from them afterwards is either this
// mount's own change (it sees the reply) or another client's (the change
// feed reports it, and the directory is then dropped from the tracking).
// So while the feed is live the mount knows every name of such a
// directory, and a lookup of a name it does not hold can be answered
// "no such entry" without asking the metadata service. That lookup is the
// one the kernel sends before every create of a new name (open with
// O_CREAT, mkdir, symlink, mknod, link, and the target of a rename):
// untarring a tree or writing a data set into new directories costs one
// metadata request per file fewer.
//
// What another client sees is unchanged: a name it creates in such a
// directory is invisible here until the feed reports it, as a negative
// entry the kernel cached is (ADR 0022); the report drops the directory
// from the tracking, and every lookup in it asks the service again. The
// answers follow the feed's generation rule: one computed across an
// invalidation gets the short negative timeout. The tracking is dropped
// whole whenever the feed stops, misses changes, or is not complete (a
// cluster of several metadata services), and a directory's when any of
// this mount's changes in it fails (the outcome is then not known) and
// when a name is renamed out of it (a rename onto another link of the
// same inode keeps the source name, and the mount cannot tell).

// maxCompleteNames bounds the names held for all tracked directories;
// past it a new directory is not tracked (its lookups ask the service).
const maxCompleteNames = 1 << 20

// completeDirs holds the names of the directories the mount tracks.
type completeDirs struct {
	mu    sync.Mutex
	dirs  map[uint64]map[string]struct{}
	names int // in all of dirs, plus one per directory
}

// made starts tracking directory ino, just made (empty).
func (c *completeDirs) made(ino uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names >= maxCompleteNames {
		return
	}
	if c.dirs == nil {
		c.dirs = make(map[uint64]map[string]struct{})
	}
	if _, ok := c.dirs[ino]; !ok {
		c.dirs[ino] = make(map[string]struct{})
		c.names++
	}
}

// added records this mount's new name in dir.
func (c *completeDirs) added(dir uint64, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.dirs[dir]
	if !ok {
		return
	}
	if c.names >= maxCompleteNames {
		c.dropLocked(dir)
		return
	}
	if _, had := d[name]; !had {
		d[name] = struct{}{}
		c.names++
	}
}

// removed records the removal of name from dir by this mount.
func (c *completeDirs) removed(dir uint64, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.dirs[dir]; ok {
		if _, had := d[name]; had {
			delete(d, name)
			c.names--
		}
	}
}

// drop stops tracking dir: another client changed it, or the outcome of
// one of this mount's changes in it is not known.
func (c *completeDirs) drop(dir uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(dir)
}

func (c *completeDirs) dropLocked(dir uint64) {
	if d, ok := c.dirs[dir]; ok {
		c.names -= len(d) + 1
		delete(c.dirs, dir)
	}
}

// clear stops tracking every directory.
func (c *completeDirs) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dirs, c.names = nil, 0
}

// absent reports whether dir is tracked and has no entry name.
func (c *completeDirs) absent(dir uint64, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.dirs[dir]
	if !ok {
		return false
	}
	_, has := d[name]
	return !has
}

// tracked returns the number of directories tracked (for tests).
func (c *completeDirs) tracked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.dirs)
}

// completeUsable reports whether answers may come from the tracking: the
// mount follows a live, complete change feed.
func (fs *fileSystem) completeUsable() bool {
	return fs.opts.WatchTimeout > 0 && fs.feed.live.Load()
}

// entryChanged records the outcome of this mount's change of name in dir:
// added (created, linked, renamed to) or removed, or, when err is not
// nil, unknown.
func (fs *fileSystem) entryChanged(dir uint64, name string, added bool, err error) {
	switch {
	case err != nil:
		// It may have been applied all the same (a reply lost): what
		// the mount knows of the directory may be stale.
		fs.complete.drop(dir)
		fs.dirs.drop(dir)
	case added:
		fs.complete.added(dir, name)
	default:
		fs.complete.removed(dir, name)
	}
}
