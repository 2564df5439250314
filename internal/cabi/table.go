package cabi

import (
	"fmt"
	"os"
	"sync"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Kind says what a handle stands for.
type Kind uint8

const (
	KindClient Kind = iota + 1
	KindFile
	KindFileset
	KindResult
	KindKV
)

func (k Kind) String() string {
	switch k {
	case KindClient:
		return "client"
	case KindFile:
		return "file"
	case KindFileset:
		return "file set"
	case KindResult:
		return "result"
	case KindKV:
		return "KV-cache store"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// ErrForked is the class of errors for a handle used in a process other
// than the one that made it (a child after fork).
var ErrForked = errs.New(errs.Invalid, "cabi: handle used after fork")

// ForkError is a handle used in a process that did not make it.
type ForkError struct {
	Handle int64
	Kind   Kind
	Owner  int // pid that made the handle
	Pid    int // pid of the caller
}

func (e *ForkError) Error() string {
	return fmt.Sprintf("sluice: %s handle %d belongs to process %d, not to this process %d (a fork): "+
		"each process must connect on its own (sluice.Client reconnects by itself after a fork)", e.Kind, e.Handle, e.Owner, e.Pid)
}

// Is makes errors.Is(err, ErrForked) true.
func (e *ForkError) Is(target error) bool { return target == ErrForked }

// BadHandleError is a handle that is unknown, closed or of another kind.
type BadHandleError struct {
	Handle int64
	Want   Kind
}

func (e *BadHandleError) Error() string {
	return fmt.Sprintf("sluice: %d is not an open %s handle", e.Handle, e.Want)
}

type entry struct {
	kind Kind
	pid  int
	v    any
}

// Table maps integer handles to Go objects. Handles are never reused
// within a process, so a stale handle cannot reach a newer object. It is
// safe for concurrent use.
type Table struct {
	getpid func() int // os.Getpid; replaced in tests to simulate a fork

	mu struct {
		sync.Mutex
		next int64
		m    map[int64]entry
	}
}

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{getpid: os.Getpid}
	t.mu.m = make(map[int64]entry)
	return t
}

// Add stores v and returns its handle (always > 0).
func (t *Table) Add(k Kind, v any) int64 {
	pid := t.getpid()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.next++
	t.mu.m[t.mu.next] = entry{kind: k, pid: pid, v: v}
	return t.mu.next
}

// Get returns the object of handle h, which must be of kind k and made by
// this process.
func (t *Table) Get(h int64, k Kind) (any, error) {
	t.mu.Lock()
	e, ok := t.mu.m[h]
	t.mu.Unlock()
	if !ok || e.kind != k {
		return nil, &BadHandleError{Handle: h, Want: k}
	}
	if pid := t.getpid(); pid != e.pid {
		return nil, &ForkError{Handle: h, Kind: k, Owner: e.pid, Pid: pid}
	}
	return e.v, nil
}

// Remove deletes handle h (of kind k) and returns its object.
func (t *Table) Remove(h int64, k Kind) (any, error) {
	v, err := t.Get(h, k)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.mu.m[h]; !ok || e.kind != k {
		return nil, &BadHandleError{Handle: h, Want: k} // removed meanwhile
	}
	delete(t.mu.m, h)
	return v, nil
}

// Len returns the number of live handles.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.m)
}
