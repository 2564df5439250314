package client

import (
	"context"
	"errors"
	"testing"
)

// TestTierShare checks the registry of shared tier fetches: a second
// consumer of a range joins the first's fetch, a failed fetch is forgotten
// (the next consumer performs its own), completed ones are kept within
// maxShareBytes (oldest forgotten first), and dropIno forgets an inode's.
func TestTierShare(t *testing.T) {
	var s tierShare
	fetch := func(k shareKey) (*tierFetch, bool) {
		return s.join(k, &tierFetch{done: make(chan struct{})})
	}
	finish := func(k shareKey, fe *tierFetch, n int, err error) {
		if err == nil {
			fe.data = make([]byte, n)
		}
		fe.err = err
		close(fe.done)
		s.done(k, fe)
	}
	const seg = 8 << 20
	k0 := shareKey{ino: 1, gen: 1, off: 0, n: seg}
	a, mine := fetch(k0)
	if !mine {
		t.Fatal("the first consumer did not get to perform the fetch")
	}
	b, mine := fetch(k0)
	if mine || b != a {
		t.Fatal("a second consumer of the same range did not join the first's fetch")
	}
	if c, mine := fetch(shareKey{ino: 1, gen: 2, off: 0, n: seg}); !mine || c == a {
		t.Fatal("another copy (generation) of the file joined the fetch")
	}
	finish(k0, a, seg, errors.New("backend down"))
	if err := b.wait(context.Background()); err == nil {
		t.Fatal("the joined consumer did not see the failure")
	}
	c, mine := fetch(k0)
	if !mine || c == a {
		t.Fatal("a failed fetch was not forgotten")
	}
	finish(k0, c, seg, nil)
	if d, mine := fetch(k0); mine || d != c || !d.completed() {
		t.Fatal("a completed fetch was not kept")
	}
	// Fill past the cap: the oldest completed fetches go first.
	for i := int64(1); i <= maxShareBytes/seg; i++ {
		k := shareKey{ino: 1, gen: 1, off: i * seg, n: seg}
		fe, _ := fetch(k)
		finish(k, fe, seg, nil)
	}
	if s.bytes > maxShareBytes {
		t.Fatalf("%d bytes kept, over the cap of %d", s.bytes, maxShareBytes)
	}
	if _, mine := fetch(k0); !mine {
		t.Fatal("the oldest fetch was not forgotten past the cap")
	}
	if _, mine := fetch(shareKey{ino: 1, gen: 1, off: seg, n: seg}); mine {
		t.Fatal("a recent fetch was forgotten")
	}
	s.dropIno(1)
	if len(s.m) != 0 || s.bytes != 0 {
		t.Fatalf("after dropIno: %d fetches, %d bytes kept", len(s.m), s.bytes)
	}
}

// TestTierShareDropForgetsOrder checks that dropIno leaves no key behind
// in the eviction order: a client that restores file after file, each
// under the byte bound, must not keep a key per fetch it ever made.
func TestTierShareDropForgetsOrder(t *testing.T) {
	var s tierShare
	for ino := uint64(1); ino <= 100; ino++ {
		k := shareKey{ino: ino, gen: 1, n: 1 << 20}
		fe, _ := s.join(k, &tierFetch{done: make(chan struct{})})
		fe.data = make([]byte, 1<<20)
		close(fe.done)
		s.done(k, fe)
		s.dropIno(ino)
	}
	if len(s.order) != 0 || len(s.m) != 0 || s.bytes != 0 {
		t.Fatalf("after 100 fetches, each dropped: %d keys in order, %d fetches, %d bytes", len(s.order), len(s.m), s.bytes)
	}
}
