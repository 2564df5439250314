package fuse

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestOpenAfterLookup: every open of a regular file through the mount
// asks the metadata service for the file's attributes (with a small
// file's bytes, so that its read asks nothing more), also right after a
// lookup of the same file by the same thread (ADR 0014 rule 4, removed:
// the lookup may be from an earlier system call that another client's
// close followed); a file rewritten through another client between a stat
// and an open of the same thread reads back new at that open; and
// close-to-open holds for files rewritten larger and smaller after the
// mount last read them.
func TestOpenAfterLookup(t *testing.T) {
	requireFUSE(t)
	addr, admin := startServerAdmin(t)
	c := proctest.Client(t, addr)
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 200
	content := func(i, gen int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("file %d gen %d;", i, gen)), 100*(1+i%7)+gen*37)
	}
	for i := range n {
		if err := proctest.WriteFile(ctx, c, fmt.Sprintf("/d/f%d", i), content(i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	m := startMount(t, addr)
	defer m.stop()
	if _, err := os.Stat(m.path("d")); err != nil { // the directory's own lookup
		t.Fatal(err)
	}
	opens := func() int { return opCount(t, admin, "getattr") + opCount(t, admin, "open_ino") }
	before, readsBefore := opens(), opCount(t, admin, "read_inline")
	for i := range n {
		b, err := os.ReadFile(m.path("d", fmt.Sprint("f", i)))
		if err != nil || !bytes.Equal(b, content(i, 0)) {
			t.Fatalf("read f%d: %d bytes, %v; want %d bytes", i, len(b), err, len(content(i, 0)))
		}
	}
	got, reads := opens()-before, opCount(t, admin, "read_inline")-readsBefore
	t.Logf("metadata requests for %d cold opens and reads of small files: %d for the attributes, %d inline reads", n, got, reads)
	if got < n {
		t.Errorf("%d getattr requests for %d cold opens: an open took its attributes from a lookup instead of asking", got, n)
	}
	// The files' bytes are inline (ADR 0009) and came with the open's
	// attributes (OpOpenIno): reading them asked nothing more.
	if reads != 0 {
		t.Errorf("%d inline read requests for %d cold reads of small files: the open's reply did not carry their bytes", reads, n)
	}
	// A stat, then a rewrite through another client, then an open by the
	// same thread a few milliseconds later: the open reads the new bytes.
	runtime.LockOSThread()
	for i := range 20 {
		p := fmt.Sprintf("/d/s%d", i)
		if err := proctest.WriteFile(ctx, c, p, content(i, 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(m.path(p)); err != nil {
			t.Fatal(err)
		}
		data := content(i, 1+i%2)
		if i%2 == 1 {
			data = data[:len(data)/3] // shorter
		}
		if err := proctest.WriteFile(ctx, c, p, data); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(m.path(p)); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s rewritten between a stat and an open: read %d bytes (%v), want %d", p, len(b), err, len(data))
		}
	}
	runtime.UnlockOSThread()
	// Close-to-open: rewrites through the library, then opens through the
	// mount after the kernel's entries expired (or not: both must hold).
	for gen := 1; gen <= 2; gen++ {
		for i := 0; i < n; i += 17 {
			data := content(i, gen)
			if gen == 2 {
				data = data[:len(data)/3] // shorter
			}
			if err := proctest.WriteFile(ctx, c, fmt.Sprintf("/d/f%d", i), data); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(m.path("d", fmt.Sprint("f", i)))
			if err != nil || !bytes.Equal(b, data) {
				t.Errorf("gen %d: f%d read %d bytes (%v), want %d", gen, i, len(b), err, len(data))
			}
		}
		time.Sleep(1100 * time.Millisecond) // past the entry and attribute timeouts
	}
	// A file the mount holds open (one File shared by its opens) grows
	// through another client; a new open on the mount reads all of it.
	held, err := os.Open(m.path("d", "f1"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	grown := bytes.Repeat([]byte("grown;"), 5000)
	if err := proctest.WriteFile(ctx, c, "/d/f1", grown); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if b, err := os.ReadFile(m.path("d", "f1")); err != nil || !bytes.Equal(b, grown) {
		t.Errorf("a new open of a file held open read %d bytes (%v), want %d", len(b), err, len(grown))
	}
	// And a descriptor held open, told the new size by a stat (as tail -f
	// polls), reads up to it. (A file this mount never read: pages it
	// cached before another client's rewrite may stay stale while it is
	// held open, ADR 0014.)
	if err := proctest.WriteFile(ctx, c, "/d/tail", []byte("start;")); err != nil {
		t.Fatal(err)
	}
	held2, err := os.Open(m.path("d", "tail"))
	if err != nil {
		t.Fatal(err)
	}
	defer held2.Close()
	if err := proctest.WriteFile(ctx, c, "/d/tail", grown); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if fi, err := held2.Stat(); err != nil || fi.Size() != int64(len(grown)) {
		t.Fatalf("stat of the held descriptor: %v, %v; want size %d", fi, err, len(grown))
	}
	b := make([]byte, len(grown)+100)
	if n, err := held2.ReadAt(b, 0); n != len(grown) || !bytes.Equal(b[:n], grown) {
		t.Errorf("the held descriptor read %d bytes (%v) after its stat said %d", n, err, len(grown))
	}
}
