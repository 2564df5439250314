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
