package cabi

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestKV drives the KV-cache store through the C ABI's logic: create,
// open, put, get into the caller's buffers, exists, delete; the store's
// handle is of its own kind, freed by Free, and refused after.
func TestKV(t *testing.T) {
	_, addr := serve(t)
	l := New()
	h := connect(t, l, addr, 30*time.Second)
	if err := l.KVCreate(h, "k", 1<<30, 0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.KVOpen(h, "nope"); Errno(err) != syscall.ENOENT {
		t.Fatalf("open a missing store: %v (errno %v)", err, Errno(err))
	}
	kh, err := l.KVOpen(h, "k")
	if err != nil {
		t.Fatal(err)
	}
	a, b := bytes.Repeat([]byte{7}, 3<<20+5), []byte("small")
	if st, err := l.KVPut(kh, []string{"a", "b"}, [][]byte{a, b}); err != nil || !st[0] || !st[1] {
		t.Fatalf("put: %v, %v", st, err)
	}
	if st, err := l.KVPut(kh, []string{"a"}, [][]byte{b}); err != nil || st[0] {
		t.Fatalf("put of a key with a value: %v, %v", st, err)
	}
	bufs := [][]byte{make([]byte, len(a)), make([]byte, 100), make([]byte, 10)}
	n, err := l.KVGet(kh, []string{"a", "b", "c"}, bufs)
	if err != nil || n[0] != len(a) || n[1] != len(b) || n[2] != -1 || !bytes.Equal(bufs[0], a) || !bytes.Equal(bufs[1][:n[1]], b) {
		t.Fatalf("get: %v, %v", n, err)
	}
	if _, err := l.KVGet(kh, []string{"a"}, [][]byte{make([]byte, 10)}); Errno(err) != syscall.ERANGE {
		t.Fatalf("get into a short buffer: %v", err)
	}
	if n, err := l.KVExists(kh, []string{"a", "b", "c", "a"}); err != nil || n != 2 {
		t.Fatalf("exists: %d, %v", n, err)
	}
	if n, err := l.KVDelete(kh, []string{"a", "c"}); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if _, err := l.KVGet(h, []string{"b"}, bufs[1:2]); err == nil {
		t.Fatal("a client handle was taken for a store's")
	}
	if err := l.Free(kh); err != nil {
		t.Fatal(err)
	}
	var be *BadHandleError
	if _, err := l.KVExists(kh, []string{"b"}); !errors.As(err, &be) {
		t.Fatalf("a freed store handle: %v", err)
	}
}
