package errs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

func TestClassesThroughWrapping(t *testing.T) {
	err := fmt.Errorf("read chunk 5 on target 2: %w", New(NotFound, "no chunk"))
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrExists) {
		t.Fatalf("errors.Is does not see the class through wrapping: %v", err)
	}
	if CodeOf(err) != NotFound || Errno(err) != syscall.ENOENT {
		t.Fatalf("CodeOf = %v, Errno = %v", CodeOf(err), Errno(err))
	}
}

func TestErrno(t *testing.T) {
	tests := []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{ErrExists, syscall.EEXIST},
		{ErrNotEmpty, syscall.ENOTEMPTY},
		{ErrNameTooLong, syscall.ENAMETOOLONG},
		{ErrNoSpace, syscall.ENOSPC},
		{ErrCorruption, syscall.EIO},
		{ErrLoop, syscall.ELOOP},
		{ErrNoData, syscall.ENODATA},
		{errors.New("something odd"), syscall.EIO},
		{fmt.Errorf("write: %w", syscall.ENOSPC), syscall.ENOSPC},
	}
	for _, tt := range tests {
		if got := Errno(tt.err); got != tt.want {
			t.Errorf("Errno(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	if CodeOf(fmt.Errorf("x: %w", syscall.EDQUOT)) != NoSpace {
		t.Error("EDQUOT is not classed as no space")
	}
}

// TestFromErrnoIsDeterministic: EAGAIN stands for two classes in toErrno
// (Conflict and ChainChanged); inverting that map by ranging over it gave
// either one at random.
func TestFromErrnoIsDeterministic(t *testing.T) {
	for _, en := range []syscall.Errno{syscall.EAGAIN, syscall.EIO, syscall.ENOENT, syscall.EFBIG} {
		first := FromErrno(en)
		for i := 0; i < 1000; i++ {
			if got := FromErrno(en); got != first {
				t.Fatalf("FromErrno(%v): call %d gave %v, the first gave %v", en, i, got, first)
			}
		}
	}
	if got := FromErrno(syscall.EAGAIN); got != Unavailable {
		t.Errorf("FromErrno(EAGAIN) = %v, want %v", got, Unavailable)
	}
}

// TestFromErrnoInvertsErrno: every class whose errno is its own comes back
// from that errno; the shared ones come back as the table documents.
func TestFromErrnoInvertsErrno(t *testing.T) {
	shared := map[Code]Code{
		Corruption: Internal, Unavailable: Internal, Internal: Internal,
		Conflict: Unavailable, ChainChanged: Unavailable, Moved: Stale, Garbled: Internal,
	}
	for c, en := range toErrno {
		want := c
		if w, ok := shared[c]; ok {
			want = w
		}
		if got := FromErrno(en); got != want {
			t.Errorf("FromErrno(Errno(%v) = %v) = %v, want %v", c, en, got, want)
		}
	}
	for en, want := range map[syscall.Errno]Code{syscall.EDQUOT: NoSpace, syscall.E2BIG: TooBig, syscall.EMFILE: Internal} {
		if got := FromErrno(en); got != want {
			t.Errorf("FromErrno(%v) = %v, want %v", en, got, want)
		}
	}
}

// TestWrapKeepsCause: re-classifying an error keeps its cause reachable
// through errors.Is and errors.As, while CodeOf reports the new class.
func TestWrapKeepsCause(t *testing.T) {
	cause := fmt.Errorf("open /data/t1/chunk: %w", &fs.PathError{Op: "open", Path: "/data/t1/chunk", Err: syscall.EMFILE})
	err := fmt.Errorf("target 3: %w", Wrap(Unavailable, cause, "read chunk 7"))
	if CodeOf(err) != Unavailable {
		t.Errorf("CodeOf = %v, want %v", CodeOf(err), Unavailable)
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, cause) || !errors.Is(err, syscall.EMFILE) {
		t.Errorf("errors.Is does not reach the class and the cause of %v", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "/data/t1/chunk" {
		t.Errorf("errors.As does not reach the *fs.PathError in %v", err)
	}
	if want := "target 3: read chunk 7: " + cause.Error(); err.Error() != want {
		t.Errorf("text %q, want %q", err.Error(), want)
	}

	// A literal Error with a cause of another class: the outer class wins
	// for CodeOf, and both are visible to errors.Is.
	inner := New(NotFound, "no chunk 7")
	outer := &Error{Code: Corruption, Err: inner}
	if CodeOf(outer) != Corruption || !errors.Is(outer, ErrCorruption) || !errors.Is(outer, inner) {
		t.Errorf("outer %v: CodeOf = %v, cause lost", outer, CodeOf(outer))
	}
	if outer.Error() != "sluice: data corruption: no chunk 7" {
		t.Errorf("text %q", outer.Error())
	}
}
