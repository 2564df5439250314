package chunk

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

// TestNoSpace fills a small tmpfs through the store: the failing write
// must say errs.NoSpace, and everything written before must read back.
func TestNoSpace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	s, err := Open(dir, Options{Target: testTarget, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()

	type written struct {
		id  ID
		off int64
		p   []byte
	}
	var ok []written
	var full error
	// Odd-sized appends to a few chunks, so the disk fills in the middle
	// of partly full blocks.
	for i := 0; full == nil && i < 1000; i++ {
		id := ID{Ino: uint64(i % 3)}
		_, clen, _ := s.ReadAt(id, 0, nil)
		p := pattern(uint64(i), 50_000+i%7)
		if err := s.WriteAt(id, clen, p, i%2 == 0); err != nil {
			full = err
			break
		}
		ok = append(ok, written{id, clen, p})
	}
	if full == nil {
		t.Fatal("a 2 MiB tmpfs never filled up")
	}
	if errs.CodeOf(full) != errs.NoSpace || !errors.Is(full, errs.ErrNoSpace) {
		t.Fatalf("write to a full disk: %v (code %v), want errs.NoSpace", full, errs.CodeOf(full))
	}
	t.Logf("disk full after %d writes: %v", len(ok), full)

	// An in-place overwrite that also extends, and a truncate up, on the
	// full disk, must fail cleanly or succeed, never damage data.
	last := ok[len(ok)-1]
	big := pattern(999, 300_000)
	if err := s.WriteAt(last.id, last.off+100, big, false); err == nil {
		ok = append(ok, written{last.id, last.off + 100, big})
	} else if errs.CodeOf(err) != errs.NoSpace {
		t.Fatalf("overwrite on a full disk: %v", err)
	}
	verify := func(what string) {
		t.Helper()
		want := map[ID]*model{}
		for _, w := range ok {
			if want[w.id] == nil {
				want[w.id] = new(model)
			}
			want[w.id].write(w.off, w.p)
		}
		for id, m := range want {
			got := make([]byte, len(*m))
			n, clen, err := s.ReadAt(id, 0, got)
			if err != nil || n != len(*m) || clen != int64(len(*m)) || !bytes.Equal(got, *m) {
				t.Fatalf("%s: %v: n=%d length=%d err=%v, want %d bytes intact (equal %v)", what, id, n, clen, err, len(*m), bytes.Equal(got[:n], *m))
			}
		}
	}
	verify("after ENOSPC")
	if s.Corruptions() != 0 {
		t.Fatalf("%d corruptions after ENOSPC", s.Corruptions())
	}

	// Restart: still intact. Then free space and write again.
	s.Close()
	if s, err = Open(dir, Options{Target: testTarget, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	verify("after restart")
	if err := s.Remove(0, []uint32{0}); err != nil {
		t.Fatal(err)
	}
	var kept []written
	for _, w := range ok {
		if w.id != (ID{}) {
			kept = append(kept, w)
		}
	}
	ok = kept
	if err := s.WriteAt(ID{Ino: 50}, 0, pattern(5, 100_000), true); err != nil {
		t.Fatalf("write after freeing space: %v", err)
	}
	ok = append(ok, written{ID{Ino: 50}, 0, pattern(5, 100_000)})
	verify("after freeing space")
}
