package cabi

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
)

func TestTableHandles(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	a := tb.Add(KindClient, "a")
	b := tb.Add(KindFile, "b")
	if a <= 0 || b <= 0 || a == b {
		t.Fatalf("handles %d, %d: want distinct and positive", a, b)
	}
	if v, err := tb.Get(a, KindClient); err != nil || v != "a" {
		t.Fatalf("Get(%d) = %v, %v", a, v, err)
	}
	var be *BadHandleError
	if _, err := tb.Get(a, KindFile); !errors.As(err, &be) || Errno(err) != syscall.EBADF {
		t.Errorf("Get of a client handle as a file: %v (errno %v), want BadHandleError, EBADF", err, Errno(err))
	}
	if _, err := tb.Remove(b, KindFile); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Get(b, KindFile); !errors.As(err, &be) {
		t.Errorf("Get after Remove: %v, want BadHandleError", err)
	}
	// Handles are never reused: a stale one cannot reach a new object.
	c := tb.Add(KindFile, "c")
	if c == b || c == a {
		t.Errorf("handle %d reused", c)
	}
	if tb.Len() != 2 {
		t.Errorf("Len = %d, want 2", tb.Len())
	}
}

func TestTableRefusesAnotherProcess(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	pid := 100
	tb.getpid = func() int { return pid }
	h := tb.Add(KindClient, "conn")
	pid = 101 // as in a child after fork
	_, err := tb.Get(h, KindClient)
	var fe *ForkError
	if !errors.As(err, &fe) || !errors.Is(err, ErrForked) || fe.Owner != 100 || fe.Pid != 101 {
		t.Fatalf("Get from another pid: %v, want ForkError owner 100 pid 101", err)
	}
	if Errno(err) != syscall.EBADF {
		t.Errorf("errno %v, want EBADF", Errno(err))
	}
	if _, err := tb.Remove(h, KindClient); !errors.As(err, &fe) {
		t.Errorf("Remove from another pid: %v, want ForkError", err)
	}
	pid = 100
	if _, err := tb.Get(h, KindClient); err != nil {
		t.Errorf("the owner still uses it: %v", err)
	}
}

func TestErrno(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{client.ErrNotExist, syscall.ENOENT},
		{client.ErrIsDir, syscall.EISDIR},
		{&TimeoutError{Op: "read", Path: "/a", Timeout: time.Second, Err: client.ErrNotExist}, syscall.ETIMEDOUT},
		{&BadHandleError{Handle: 3, Want: KindFile}, syscall.EBADF},
		{errors.New("unclassified"), syscall.EIO},
	} {
		if got := Errno(tc.err); got != tc.want {
			t.Errorf("Errno(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestPackEntriesRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		es := make([]Entry, r.IntN(5))
		for i := range es {
			name := make([]byte, r.IntN(300))
			for j := range name {
				name[j] = byte(r.UintN(256))
			}
			es[i] = Entry{Ino: r.Uint64(), Size: r.Int64() - r.Int64(), Mtime: r.Int64(), Mode: r.Uint32(), Chain: r.Uint32(), Name: string(name)}
		}
		got, err := UnpackEntries(PackEntries(es))
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 && len(got) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, es) {
			t.Fatalf("round trip: got %+v, want %+v", got, es)
		}
	}
}

func FuzzUnpackEntries(f *testing.F) {
	f.Add(PackEntries([]Entry{{Ino: 1, Size: 2, Mode: 0o100644, Name: "a"}}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := UnpackEntries(b)
		if err != nil {
			return
		}
		if again := PackEntries(es); string(again) != string(b) {
			t.Fatalf("decode then encode changed the bytes")
		}
	})
}
