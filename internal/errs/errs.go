// Package errs is the one leaf package that defines Sluice's error classes.
//
// Every component returns errors that wrap one of the *Error values below
// (with fmt.Errorf("...: %w", err)), so that callers test them with errors.Is
// and adapters translate them exactly once: to an errno (FUSE), an S3 error
// code (gateway) or a wire status code (protocol).
//
// The classes also match the io/fs sentinel errors, so errors.Is(err,
// fs.ErrNotExist) works on anything Sluice returns.
package errs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// Code is a wire-stable error class. Values are part of the wire format
// (docs/format.md) and must never be renumbered.
type Code uint32

const (
	OK           Code = 0
	NotFound     Code = 1  // ENOENT
	Exists       Code = 2  // EEXIST
	NotEmpty     Code = 3  // ENOTEMPTY
	NotDir       Code = 4  // ENOTDIR
	IsDir        Code = 5  // EISDIR
	Invalid      Code = 6  // EINVAL
	NameTooLong  Code = 7  // ENAMETOOLONG
	Permission   Code = 8  // EACCES
	NoSpace      Code = 9  // ENOSPC
	Corruption   Code = 10 // EIO: a checksum or format check failed
	Unavailable  Code = 11 // EIO/EAGAIN: a server or target cannot be reached
	Stale        Code = 12 // ESTALE: the object changed or went away underneath
	Loop         Code = 13 // ELOOP
	CrossDevice  Code = 14 // EXDEV
	NoData       Code = 15 // ENODATA: no such extended attribute
	TooBig       Code = 16 // EFBIG / E2BIG
	NotPermitted Code = 17 // EPERM
	Protocol     Code = 18 // malformed request
	Internal     Code = 19 // a broken invariant on the server
	Conflict     Code = 20 // optimistic transaction conflict (retried internally)
	Range        Code = 21 // ERANGE: buffer too small
	NotSupported Code = 22 // ENOTSUP
	Busy         Code = 23 // EBUSY
	ChainChanged Code = 24 // a request named an old chain version: refresh the chain table and retry
	Moved        Code = 25 // ESTALE: the chunk's file moved to another layout (migration): refresh the file's layout and retry
	Garbled      Code = 26 // EIO: data did not match its checksum in transit (a request's or a reply's): send it again
)

var names = map[Code]string{
	OK: "ok", NotFound: "not found", Exists: "already exists", NotEmpty: "directory not empty",
	NotDir: "not a directory", IsDir: "is a directory", Invalid: "invalid argument",
	NameTooLong: "name too long", Permission: "permission denied", NoSpace: "no space left",
	Corruption: "data corruption", Unavailable: "unavailable", Stale: "stale handle",
	Loop: "too many levels of symbolic links", CrossDevice: "cross-device link",
	NoData: "no such attribute", TooBig: "too big", NotPermitted: "operation not permitted",
	Protocol: "protocol error", Internal: "internal error", Conflict: "transaction conflict",
	Range: "result too large", NotSupported: "not supported", Busy: "busy",
	ChainChanged: "chain changed", Moved: "moved to another layout", Garbled: "garbled in transit",
}

func (c Code) String() string {
	if s, ok := names[c]; ok {
		return s
	}
	return fmt.Sprintf("error code %d", uint32(c))
}

// Error is a classified error. Its Msg says what happened, with identifiers.
// Err, when set, is the cause that was classified (a syscall.Errno, a
// *net.OpError, an error of another class): Unwrap returns it, so that
// errors.Is and errors.As still reach it after the error was re-classified.
// CodeOf reports the outermost class.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Msg != "":
		return e.Msg
	case e.Err != nil:
		return "sluice: " + e.Code.String() + ": " + e.Err.Error()
	}
	return "sluice: " + e.Code.String()
}

// Unwrap returns the cause, or nil.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, errs.ErrNotFound) and errors.Is(err, fs.ErrNotExist) work.
func (e *Error) Is(target error) bool {
	if t, ok := target.(*Error); ok {
		return t.Code == e.Code
	}
	switch target {
	case fs.ErrNotExist:
		return e.Code == NotFound
	case fs.ErrExist:
		return e.Code == Exists
	case fs.ErrPermission:
		return e.Code == Permission || e.Code == NotPermitted
	case fs.ErrInvalid:
		return e.Code == Invalid
	}
	return false
}

// Sentinel values, one per class, for errors.Is.
var (
	ErrNotFound     = &Error{Code: NotFound, Msg: "sluice: not found"}
	ErrExists       = &Error{Code: Exists, Msg: "sluice: already exists"}
	ErrNotEmpty     = &Error{Code: NotEmpty, Msg: "sluice: directory not empty"}
	ErrNotDir       = &Error{Code: NotDir, Msg: "sluice: not a directory"}
	ErrIsDir        = &Error{Code: IsDir, Msg: "sluice: is a directory"}
	ErrInvalid      = &Error{Code: Invalid, Msg: "sluice: invalid argument"}
	ErrNameTooLong  = &Error{Code: NameTooLong, Msg: "sluice: name too long"}
	ErrPermission   = &Error{Code: Permission, Msg: "sluice: permission denied"}
	ErrNoSpace      = &Error{Code: NoSpace, Msg: "sluice: no space left"}
	ErrCorruption   = &Error{Code: Corruption, Msg: "sluice: data corruption"}
	ErrUnavailable  = &Error{Code: Unavailable, Msg: "sluice: unavailable"}
	ErrStale        = &Error{Code: Stale, Msg: "sluice: stale handle"}
	ErrLoop         = &Error{Code: Loop, Msg: "sluice: too many levels of symbolic links"}
	ErrCrossDevice  = &Error{Code: CrossDevice, Msg: "sluice: cross-device link"}
	ErrNoData       = &Error{Code: NoData, Msg: "sluice: no such attribute"}
	ErrTooBig       = &Error{Code: TooBig, Msg: "sluice: too big"}
	ErrNotPermitted = &Error{Code: NotPermitted, Msg: "sluice: operation not permitted"}
	ErrProtocol     = &Error{Code: Protocol, Msg: "sluice: protocol error"}
	ErrInternal     = &Error{Code: Internal, Msg: "sluice: internal error"}
	ErrConflict     = &Error{Code: Conflict, Msg: "sluice: transaction conflict"}
	ErrRange        = &Error{Code: Range, Msg: "sluice: result too large"}
	ErrNotSupported = &Error{Code: NotSupported, Msg: "sluice: not supported"}
	ErrBusy         = &Error{Code: Busy, Msg: "sluice: busy"}
	ErrChainChanged = &Error{Code: ChainChanged, Msg: "sluice: chain changed"}
	ErrGarbled      = &Error{Code: Garbled, Msg: "sluice: garbled in transit"}
)

// New returns an error of class c with a formatted message.
func New(c Code, format string, args ...any) error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// Wrap classifies err as c: the message is the formatted text followed by
// ": " and err's text, and err stays reachable through Unwrap.
func Wrap(c Code, err error, format string, args ...any) error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...) + ": " + err.Error(), Err: err}
}

// CodeOf returns the class of err: OK for nil, the Code of the first *Error
// in its chain, Unavailable for network-looking errors, Internal otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return FromErrno(en)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return NotFound
	case errors.Is(err, fs.ErrExist):
		return Exists
	case errors.Is(err, fs.ErrPermission):
		return Permission
	}
	return Internal
}

var toErrno = map[Code]syscall.Errno{
	NotFound: syscall.ENOENT, Exists: syscall.EEXIST, NotEmpty: syscall.ENOTEMPTY,
	NotDir: syscall.ENOTDIR, IsDir: syscall.EISDIR, Invalid: syscall.EINVAL,
	NameTooLong: syscall.ENAMETOOLONG, Permission: syscall.EACCES, NoSpace: syscall.ENOSPC,
	Corruption: syscall.EIO, Unavailable: syscall.EIO, Stale: syscall.ESTALE,
	Loop: syscall.ELOOP, CrossDevice: syscall.EXDEV, NoData: syscall.ENODATA,
	TooBig: syscall.EFBIG, NotPermitted: syscall.EPERM, Protocol: syscall.EPROTO,
	Internal: syscall.EIO, Conflict: syscall.EAGAIN, Range: syscall.ERANGE,
	NotSupported: syscall.ENOTSUP, Busy: syscall.EBUSY, ChainChanged: syscall.EAGAIN, Moved: syscall.ESTALE,
	Garbled: syscall.EIO,
}

// Errno translates err to the errno a POSIX caller expects (0 for nil).
func Errno(err error) syscall.Errno {
	c := CodeOf(err)
	if c == OK {
		return 0
	}
	if en, ok := toErrno[c]; ok {
		return en
	}
	return syscall.EIO
}

// FromErrno classifies a syscall errno returned by the local file system.
//
// It is an explicit table rather than an inversion of toErrno, where several
// classes share an errno: EIO stands for Corruption, Unavailable, Internal and Garbled,
// EAGAIN for Conflict and ChainChanged, and ESTALE for Stale and Moved.
// Conflict, ChainChanged and Moved are
// Sluice's own protocol classes, which no local errno can mean; a local EAGAIN
// is a resource temporarily unavailable, so Unavailable. A local EIO says
// nothing about checksums, so Internal, as for an errno not listed.
func FromErrno(en syscall.Errno) Code {
	switch en {
	case syscall.ENOENT:
		return NotFound
	case syscall.EEXIST:
		return Exists
	case syscall.ENOTEMPTY:
		return NotEmpty
	case syscall.ENOTDIR:
		return NotDir
	case syscall.EISDIR:
		return IsDir
	case syscall.EINVAL:
		return Invalid
	case syscall.ENAMETOOLONG:
		return NameTooLong
	case syscall.EACCES:
		return Permission
	case syscall.ENOSPC, syscall.EDQUOT:
		return NoSpace
	case syscall.EAGAIN:
		return Unavailable
	case syscall.ESTALE:
		return Stale
	case syscall.ELOOP:
		return Loop
	case syscall.EXDEV:
		return CrossDevice
	case syscall.ENODATA:
		return NoData
	case syscall.EFBIG, syscall.E2BIG:
		return TooBig
	case syscall.EPERM:
		return NotPermitted
	case syscall.EPROTO:
		return Protocol
	case syscall.ERANGE:
		return Range
	case syscall.ENOTSUP:
		return NotSupported
	case syscall.EBUSY:
		return Busy
	}
	return Internal
}
