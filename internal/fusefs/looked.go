package fusefs

import (
	"sync"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// lookedAttrs holds the attributes of regular files as a lookup just
// returned them, for the open that follows it. open(2) of a path whose
// dentry the kernel does not hold sends LOOKUP and then OPEN from the same
// thread within one system call; the open needs the file's attributes
// (its layout, size and mtime), and the lookup's, a moment old, are those
// the metadata service had during that same open(2): taking them saves the
// open's getattr, a round trip per file a reader opens cold (a DataLoader
// reading samples one file at a time).
//
// An entry serves one open, only of the thread that looked it up, and
// only within lookedFresh of the lookup, so it never stands for a
// revalidation done by an earlier system call: a writer that closed before
// the open(2) began is seen, as close-to-open consistency asks
// (docs/adr/0014-mount-caches.md). Changes made through this mount to the
// file drop its entry.
//
// It is safe for concurrent use.
type lookedAttrs struct {
	mu sync.Mutex
	m  map[uint64]lookedAttr // guarded by mu
}

type lookedAttr struct {
	a   client.InodeAttr
	pid uint32
	at  time.Time
}

// lookedFresh bounds the age of a lookup an open may use: the two requests
// of one open(2) come microseconds apart, a loaded machine may stretch it
// to milliseconds.
const lookedFresh = 20 * time.Millisecond

// maxLooked bounds lookedAttrs; when full it is cleared, which costs a
// getattr per open only.
const maxLooked = 4096

func (l *lookedAttrs) put(a client.InodeAttr, pid uint32, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= maxLooked {
		l.m = make(map[uint64]lookedAttr)
	}
	l.m[a.Ino] = lookedAttr{a, pid, now}
}

// take removes ino's entry and returns its attributes if the same thread
// (pid) looked it up less than lookedFresh before now.
func (l *lookedAttrs) take(ino uint64, pid uint32, now time.Time) (client.InodeAttr, bool) {
	l.mu.Lock()
	e, ok := l.m[ino]
	if ok {
		delete(l.m, ino)
	}
	l.mu.Unlock()
	if !ok || e.pid != pid || pid == 0 || now.Sub(e.at) > lookedFresh || now.Before(e.at) {
		return client.InodeAttr{}, false
	}
	return e.a, true
}

// drop forgets ino.
func (l *lookedAttrs) drop(ino uint64) {
	l.mu.Lock()
	delete(l.m, ino)
	l.mu.Unlock()
}
