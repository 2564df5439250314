// Package cabi is the logic behind libsluice, the C ABI over the client
// library (cmd/libsluice) that the Python package calls through ctypes.
//
// Everything a C caller holds is an integer handle into a Table: clients,
// open files, file sets and pending results. No Go pointer ever crosses to
// C; C memory (the caller's buffers) crosses into Go only for the duration
// of one call, and every goroutine a call starts has finished writing into
// that memory before the call returns.
//
// Fork: a Go runtime does not survive fork(2) (its threads are gone in the
// child), so a handle is valid only in the process that made it. Every
// handle records the pid that created it and a call from another pid fails
// with ErrForked instead of using a connection that belongs to the parent.
// The Python package checks the pid itself before calling, and loads a
// private copy of the library in a forked child (docs/python.md).
//
// Deadlines are set here, at the edge: each operation (each item of a
// batch) runs under the client's Timeout, and running out of it is a
// *TimeoutError (ETIMEDOUT), never a hang.
//
// Errors are translated to errno exactly once, by Errno.
package cabi
