package cabi

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// TimeoutError is an operation that ran out of the client's Timeout.
type TimeoutError struct {
	Op      string
	Path    string
	Timeout time.Duration
	Err     error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("sluice: %s %s: no answer within the client's timeout of %v: %v", e.Op, e.Path, e.Timeout, e.Err)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// Errno is the one translation of this package's errors to a POSIX errno
// (positive; 0 for nil): ETIMEDOUT for a *TimeoutError, EBADF for a bad or
// forked handle, else the client's classification (EIO for anything
// unclassified).
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var te *TimeoutError
	var fe *ForkError
	var be *BadHandleError
	switch {
	case errors.As(err, &te):
		return syscall.ETIMEDOUT
	case errors.As(err, &fe), errors.As(err, &be):
		return syscall.EBADF
	}
	if en := client.Errno(err); en != 0 {
		return en
	}
	return syscall.EIO
}
