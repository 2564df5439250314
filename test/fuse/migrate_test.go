package fuse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// TestMigrateThroughMount migrates a file with `sluice migrate` while a
// program rewrites it through a real FUSE mount (pwrite and fsync on one
// open descriptor) and another reads a range nobody writes: the file ends
// with exactly the bytes written (through the mount and through the
// library), the reader never saw a wrong byte, and the file has the new
// layout.
func TestMigrateThroughMount(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "")
	m := startMount(t, s.addr)
	c := s.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	must(t, os.Mkdir(m.path("d"), 0o755))
	must(t, c.SetLayout(ctx, "/d", client.Layout{StripeCount: 1}))
	const size, region = 16 << 20, 6 << 20
	rng := rand.New(rand.NewPCG(3, 4))
	model := make([]byte, size)
	for i := range model {
		model[i] = byte(rng.Uint32())
	}
	must(t, os.WriteFile(m.path("d", "f"), model, 0o644))
	static := bytes.Clone(model[10<<20:])

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr, rerr error
	writes, reads := 0, 0
	wg.Go(func() {
		f, err := os.OpenFile(m.path("d", "f"), os.O_RDWR, 0)
		if err != nil {
			werr = err
			return
		}
		defer f.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				werr = f.Sync()
				return
			default:
			}
			off, n := rng.IntN(region), 1+rng.IntN(128<<10)
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			if _, err := f.WriteAt(b, int64(off)); err != nil {
				werr = err
				return
			}
			copy(model[off:], b)
			writes++
			if i%8 == 0 {
				if err := f.Sync(); err != nil {
					werr = err
					return
				}
			}
		}
	})
	wg.Go(func() {
		f, err := os.Open(m.path("d", "f"))
		if err != nil {
			rerr = err
			return
		}
		defer f.Close()
		buf := make([]byte, 512<<10)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			o := (i * 197 << 10) % (len(static) - len(buf))
			if _, err := f.ReadAt(buf, int64(10<<20+o)); err != nil {
				rerr = err
				return
			}
			if !bytes.Equal(buf, static[o:o+len(buf)]) {
				rerr = os.ErrInvalid
				t.Errorf("read through the mount at %d returned wrong bytes", 10<<20+o)
				return
			}
			reads++
		}
	})
	time.Sleep(200 * time.Millisecond)
	out, err := exec.Command(binary, "migrate", "--stripe-count", "3", "--stripe-size", "128K", "--rate", "12M", "--server", s.addr, "/d/f").CombinedOutput()
	if err != nil {
		t.Fatalf("sluice migrate: %v: %s", err, out)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if werr != nil || rerr != nil {
		t.Fatalf("writer: %v; reader: %v", werr, rerr)
	}
	t.Logf("%d writes and %d reads through the mount during the migration", writes, reads)
	if writes == 0 || reads == 0 {
		t.Fatal("the writer or the reader did nothing")
	}
	l, err := c.GetLayout(ctx, "/d/f")
	if err != nil || l.StripeCount != 3 || l.Data == 0 {
		t.Fatalf("layout after the migration: %+v %v", l, err)
	}
	want := sha256.Sum256(model)
	got, err := os.ReadFile(filepath.Join(m.dir, "d", "f"))
	if err != nil || sha256.Sum256(got) != want {
		t.Fatalf("through the mount after the migration: %v (or SHA-256 differs)", err)
	}
	f, err := c.Open(ctx, "/d/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lib, err := io.ReadAll(f)
	if err != nil || sha256.Sum256(lib) != want {
		t.Fatalf("through the library after the migration: %v (or SHA-256 differs)", err)
	}
}
