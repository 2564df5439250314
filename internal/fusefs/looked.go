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
// It is a fixed table of slots chosen by inode number (a slot holds the
// latest lookup that fell in it), so that a stat-only workload pays a copy
// into a slot and no allocation. It is safe for concurrent use.
type lookedAttrs struct {
	mu    [lookedLocks]sync.Mutex
	slots [lookedSlots]lookedAttr // slot i guarded by mu[i%lookedLocks]
}

type lookedAttr struct {
	a   client.InodeAttr
	pid uint32
	at  time.Time
}

const (
	lookedSlots = 1024 // opens in flight right after their lookups, with room to spare
	lookedLocks = 64
)

// lookedFresh bounds the age of a lookup an open may use: the two requests
// of one open(2) come microseconds apart, a loaded machine may stretch it
// to milliseconds.
const lookedFresh = 20 * time.Millisecond

func (l *lookedAttrs) put(a client.InodeAttr, pid uint32, now time.Time) {
	i := a.Ino % lookedSlots
	m := &l.mu[i%lookedLocks]
	m.Lock()
	l.slots[i] = lookedAttr{a, pid, now}
	m.Unlock()
}

// take removes ino's entry and returns its attributes if the same thread
// (pid) looked it up less than lookedFresh before now.
func (l *lookedAttrs) take(ino uint64, pid uint32, now time.Time) (client.InodeAttr, bool) {
	i := ino % lookedSlots
	m := &l.mu[i%lookedLocks]
	m.Lock()
	e := l.slots[i]
	ok := e.a.Ino == ino && !e.at.IsZero()
	if ok {
		l.slots[i] = lookedAttr{}
	}
	m.Unlock()
	if !ok || e.pid != pid || pid == 0 || now.Sub(e.at) > lookedFresh || now.Before(e.at) {
		return client.InodeAttr{}, false
	}
	return e.a, true
}

// drop forgets ino.
func (l *lookedAttrs) drop(ino uint64) {
	i := ino % lookedSlots
	m := &l.mu[i%lookedLocks]
	m.Lock()
	if l.slots[i].a.Ino == ino {
		l.slots[i] = lookedAttr{}
	}
	m.Unlock()
}
