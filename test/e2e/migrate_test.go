package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// dataChunks returns the chunk data files of data ID id on every target of
// the server.
func dataChunks(t *testing.T, dataDir string, id uint64) []string {
	t.Helper()
	pat := filepath.Join(dataDir, "targets", "*", "chunks", fmt.Sprintf("%02x", id&0xff), fmt.Sprintf("%016x.*.sum", id))
	m, err := filepath.Glob(pat)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitNoChunks waits until no target holds a chunk of data ID id (the
// garbage collector removed them).
func waitNoChunks(t *testing.T, dataDir string, id uint64, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := dataChunks(t, dataDir, id)
		if len(m) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (data %d) still on the targets: %v", what, id, m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writer rewrites random ranges of a file (and grows it) through one open
// File until stopped, keeping the model of what the file must hold.
type writer struct {
	mu    sync.Mutex
	model []byte
	n     int
	err   error
}

func (w *writer) run(ctx context.Context, t *testing.T, c *client.Client, p string, seed uint64, region, grow int, stop <-chan struct{}) {
	f, err := c.OpenFile(ctx, p, client.O_RDWR, 0)
	if err != nil {
		w.err = err
		return
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 0; ; i++ {
		select {
		case <-stop:
			if err := f.Close(); err != nil && w.err == nil {
				w.err = err
			}
			return
		default:
		}
		off := rng.IntN(region)
		n := 1 + rng.IntN(256<<10)
		if i%7 == 0 {
			off = len(w.model) + rng.IntN(64<<10) // grow, maybe past a hole
			if off+n > grow {
				off, n = rng.IntN(region), 4096
			}
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(b, int64(off)); err != nil {
			w.err = fmt.Errorf("write %d at %d: %w", n, off, err)
			f.Close()
			return
		}
		w.mu.Lock()
		if end := off + n; end > len(w.model) {
			w.model = append(w.model, make([]byte, end-len(w.model))...)
		}
		copy(w.model[off:], b)
		w.n++
		w.mu.Unlock()
		if i%5 == 0 {
			if err := f.Sync(); err != nil {
				w.err = fmt.Errorf("sync: %w", err)
				f.Close()
				return
			}
		}
	}
}

// reader reads a range no writer touches, again and again, through its own
// open File, and checks every byte.
func reader(ctx context.Context, c *client.Client, p string, off int, want []byte, stop <-chan struct{}) (int, error) {
	f, err := c.Open(ctx, p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n := 0; ; n++ {
		select {
		case <-stop:
			return n, nil
		default:
		}
		o := (n * 333 << 10) % (len(want) - len(buf))
		if _, err := f.ReadAt(buf, int64(off+o)); err != nil {
			return n, fmt.Errorf("read at %d: %w", off+o, err)
		}
		if !bytes.Equal(buf, want[o:o+len(buf)]) {
			return n, fmt.Errorf("read at %d returned wrong bytes", off+o)
		}
	}
}

var dataRe = regexp.MustCompile(`data=(\d+)`)

// TestMigrate migrates a file with `sluice migrate` while a writer
// rewrites and grows it and a reader checks a range nobody writes: the
// file ends with exactly the writer's bytes (SHA-256), the reader never
// saw a wrong byte, the file has the new layout, and the old chunks are
// collected. Then a migration into a pool, and one of a file without
// chunks.
func TestMigrate(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	c := s.client()
	ctx := context.Background()
	s.mustCLI("mkdir", "/m")
	s.mustCLI("layout", "set", "/m", "--stripe-count", "1")

	const size, region, grow = 24 << 20, 8 << 20, 30 << 20
	orig := randBytes(41, size)
	writeFile(t, c, "/m/f", orig)
	fi, err := c.Stat(ctx, "/m/f")
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Attr().Ino
	if n := len(dataChunks(t, dir, ino)); n != 1 {
		t.Fatalf("before: %d chunks of inode %d, want 1", n, ino)
	}

	w := &writer{model: bytes.Clone(orig)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { w.run(ctx, t, c, "/m/f", 42, region, grow, stop) })
	var reads int
	var rerr error
	rc := s.client()
	wg.Go(func() { reads, rerr = reader(ctx, rc, "/m/f", 16<<20, orig[16<<20:], stop) })

	time.Sleep(300 * time.Millisecond) // the writer is under way
	out := s.mustCLI("migrate", "-v", "--stripe-count", "3", "--stripe-size", "256K", "--rate", "16M", "/m/f")
	t.Logf("sluice migrate:\n%s", out)
	w.mu.Lock()
	during := w.n
	w.mu.Unlock()
	time.Sleep(300 * time.Millisecond) // the writer goes on with the new layout
	close(stop)
	wg.Wait()
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	if rerr != nil {
		t.Fatalf("reader after %d reads: %v", reads, rerr)
	}
	t.Logf("%d writes (%d before the migration ended), %d reads of 1 MiB", w.n, during, reads)
	if during == 0 || w.n == during || reads == 0 {
		t.Fatalf("the writer and reader did not overlap the migration: writes %d (%d during), reads %d", w.n, during, reads)
	}
	l, err := c.GetLayout(ctx, "/m/f")
	if err != nil {
		t.Fatal(err)
	}
	if l.StripeCount != 3 || l.StripeSize != 256<<10 || len(l.Chains) != 3 || l.Data == 0 || l.Data == ino {
		t.Fatalf("layout after migrate: %+v", l)
	}
	if got := s.mustCLI("layout", "get", "/m/f"); !strings.Contains(got, fmt.Sprintf("data=%d", l.Data)) {
		t.Errorf("layout get does not show data=%d: %q", l.Data, got)
	}
	if m := dataRe.FindStringSubmatch(out); m == nil || m[1] != strconv.FormatUint(l.Data, 10) {
		t.Errorf("migrate -v does not name data %d: %q", l.Data, out)
	}
	got, err := readFile(s.client(), "/m/f")
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(w.model) {
		t.Fatalf("after the migration the file (%d bytes) differs from what was written (%d bytes)", len(got), len(w.model))
	}
	waitNoChunks(t, dir, ino, "the old chunks")
	if n := len(dataChunks(t, dir, l.Data)); n != 3 {
		t.Errorf("the new layout has %d chunk files, want 3", n)
	}
	if out := s.mustCLI("audit", "ls"); !strings.Contains(out, "migrate") {
		t.Errorf("audit ls shows no migration:\n%s", out)
	}

	// Into a pool, through a second migration.
	s.mustCLI("pool", "create", "slow", "3", "4")
	s.mustCLI("migrate", "--pool", "slow", "--stripe-count", "2", "/m/f")
	l2, err := c.GetLayout(ctx, "/m/f")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(l2.Chains)
	if !slices.Equal(l2.Chains, []uint32{3, 4}) || l2.Data == l.Data {
		t.Fatalf("layout after migrate --pool slow: %+v", l2)
	}
	if got, err := readFile(s.client(), "/m/f"); err != nil || sha256.Sum256(got) != sha256.Sum256(w.model) {
		t.Fatalf("after the second migration: %v (or the bytes differ)", err)
	}
	waitNoChunks(t, dir, l.Data, "the first copy")

	// A file without chunks (inline), a tree with -r, bad input.
	writeFile(t, c, "/m/small", []byte("tiny"))
	s.mustCLI("mkdir", "/m/sub")
	writeFile(t, c, "/m/sub/big", randBytes(43, 3<<20+17))
	s.mustCLI("migrate", "-r", "--stripe-count", "2", "/m")
	for _, p := range []string{"/m/small", "/m/sub/big"} {
		if l, err := c.GetLayout(ctx, p); err != nil || l.StripeCount != 2 {
			t.Errorf("%s after migrate -r: %+v %v", p, l, err)
		}
	}
	if got, err := readFile(s.client(), "/m/sub/big"); err != nil || !bytes.Equal(got, randBytes(43, 3<<20+17)) {
		t.Errorf("/m/sub/big after migrate -r: %v (or the bytes differ)", err)
	}
	s.failCLI("directory", "migrate", "/m")
	s.failCLI("not found", "migrate", "/nope")
	s.failCLI("targets", "migrate", "--stripe-count", "9", "/m/f")
	s.failCLI("pool", "migrate", "--pool", "nope", "/m/f")
}

// TestMigrateKilled kills `sluice migrate` with kill -9 before and after
// it froze the old chunks. The file keeps its old layout and its bytes;
// after the freeze, writes wait until the metadata service aborts the
// migration at the end of its lease, then go through; the half-copy is
// collected; a second migration finishes.
func TestMigrateKilled(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	c := s.client()
	ctx := context.Background()
	s.mustCLI("mkdir", "/k")
	s.mustCLI("layout", "set", "/k", "--stripe-count", "2")
	want := randBytes(51, 12<<20+5)
	writeFile(t, c, "/k/f", want)
	before, err := c.GetLayout(ctx, "/k/f")
	if err != nil {
		t.Fatal(err)
	}
	// Killed while copying (rate-capped, so that some of the copy is
	// written), and after the freeze (held there by --pause-at).
	for _, phase := range []string{"copy", "recopy"} {
		t.Run(phase, func(t *testing.T) {
			args := []string{"migrate", "-v", "--stripe-count", "4", "--rate", "2M", "--lease", "3s"}
			if phase == "recopy" {
				args = append(args, "--pause-at", "verify")
			}
			p, line := proctest.Start(t, binary, []string{"SLUICE_SERVER=" + s.addr},
				regexp.MustCompile(`: `+phase+` \(to .* data=(\d+)\)`), append(args, "/k/f")...)
			data, err := strconv.ParseUint(line, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if phase == "recopy" {
				if _, err := p.WaitLine(regexp.MustCompile(`paused before verify`), time.Minute); err != nil {
					t.Fatal(err)
				}
			} else {
				time.Sleep(200 * time.Millisecond) // some of the copy is written
			}
			p.Kill()
			if phase == "recopy" {
				// Frozen: a write waits for the abort (lease 3 s), then lands.
				start := time.Now()
				f, err := c.OpenFile(ctx, "/k/f", client.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				patch := []byte("written after the migrator died")
				if _, err := f.WriteAt(patch, 1000); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatalf("write to a file whose migrator died: %v", err)
				}
				copy(want[1000:], patch)
				t.Logf("a write during the dead migration's freeze took %v", time.Since(start).Round(time.Millisecond))
			}
			l, err := c.GetLayout(ctx, "/k/f")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(l.Chains, before.Chains) || l.Data != before.Data {
				t.Fatalf("after kill -9 in %s the layout is %+v, want the old %+v", phase, l, before)
			}
			if got, err := readFile(s.client(), "/k/f"); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("after kill -9 in %s: %v (or the bytes differ)", phase, err)
			}
			waitNoChunks(t, dir, data, "the half-copy")
		})
	}
	s.mustCLI("migrate", "--stripe-count", "4", "/k/f")
	if got, err := readFile(s.client(), "/k/f"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the migration: %v (or the bytes differ)", err)
	}
	if l, err := c.GetLayout(ctx, "/k/f"); err != nil || l.StripeCount != 4 {
		t.Fatalf("layout: %+v %v", l, err)
	}
}
