package tier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// Restore on read and before write (ADR 0016).

// restoringClient is a client with the defaults: the first read of a
// released file restores it in the background.
func restoringClient(t testing.TB, addr string, tierTimeout time.Duration) *client.Client {
	t.Helper()
	return newClientOpts(t, client.Options{Server: addr, TierTimeout: tierTimeout})
}

// releasedFiles writes files (path -> content) through c, archives and
// releases them, and waits until their chunks are gone from the targets.
func releasedFiles(t testing.TB, fs *fsServer, c *client.Client, files map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	var paths []string
	for p, d := range files {
		if err := c.MkdirAll(ctx, filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeSluice(ctx, c, p, d); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	fs.mustCLI(append([]string{"hsm", "archive"}, paths...)...)
	used := fs.chunkBytes()
	fs.mustCLI(append([]string{"hsm", "release"}, paths...)...)
	waitFor(t, "chunks of released files removed", func() bool { return fs.chunkBytes() < used/100+1 })
}

// hsmState is the HSM state of p as `sluice hsm state` prints it.
func hsmState(t testing.TB, fs *fsServer, p string) string {
	t.Helper()
	st, _, _ := strings.Cut(fs.mustCLI("hsm", "state", p), "\t")
	return st
}

// waitArchived waits until every file is archived again, reading each
// still released through c meanwhile (a read restarts a restore that
// failed earlier).
func waitArchived(t testing.TB, fs *fsServer, c *client.Client, files map[string][]byte) {
	t.Helper()
	for p, d := range files {
		waitFor(t, p+" archived after its read", func() bool {
			if hsmState(t, fs, p) == "archived" {
				return true
			}
			if sum, _, err := readSum(context.Background(), c, p); err == nil && sum != sha256.Sum256(d) {
				t.Fatalf("read of %s returned wrong bytes", p)
			}
			return false
		})
	}
}

// checkOnTargets stops the backend and reads every file through a new
// client: the bytes must come from the targets, byte-exact.
func checkOnTargets(t testing.TB, fs *fsServer, be *backend, files map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	var total int64
	for _, d := range files {
		total += int64(len(d))
	}
	if got := fs.chunkBytes(); got < total {
		t.Fatalf("restored files hold %d bytes of chunks; want at least %d", got, total)
	}
	be.proc.Pause(t)
	defer be.proc.Resume()
	c := newClient(t, fs.addr, 2*time.Second)
	for p, d := range files {
		if sum, n, err := readSum(ctx, c, p); err != nil || sum != sha256.Sum256(d) {
			t.Fatalf("read of restored %s with the backend stopped: %d bytes, %v", p, n, err)
		}
	}
}

// TestRestoreOnRead: reading released files through the library returns
// their bytes exactly and restores them: they become archived, their
// bytes are on the targets (a read with the backend stopped works), over
// a second Sluice's gateway and over versitygw.
func TestRestoreOnRead(t *testing.T) {
	for i, start := range backends {
		be := start(t)
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			fs := startFS(t)
			addBackend(t, fs, be, fmt.Sprintf("r%d/", i))
			c := restoringClient(t, fs.addr, 0)
			files := map[string][]byte{
				"/d/stripes": randomData(21, 9<<20+4095), // several 1 MiB stripes on each chain
				"/d/odd":     randomData(22, 3<<20+17),
				"/d/small":   randomData(23, 150<<10), // one block, one chunk
			}
			releasedFiles(t, fs, c, files)
			for p, d := range files {
				if st := hsmState(t, fs, p); st != "released" {
					t.Fatalf("%s before its read: %s", p, st)
				}
				sum, n, err := readSum(ctx, c, p)
				if err != nil || sum != sha256.Sum256(d) {
					t.Fatalf("first read of released %s: %d bytes, %v", p, n, err)
				}
			}
			waitArchived(t, fs, c, files)
			if s := c.RestoreStats(); s.Copied != uint64(len(files)) {
				t.Errorf("restores copied by the reader: %+v; want %d", s, len(files))
			}
			checkOnTargets(t, fs, be, files)
			// The reader's open File moves to the targets too.
			be.proc.Pause(t)
			sum, _, err := readSum(ctx, c, "/d/stripes")
			be.proc.Resume()
			if err != nil || sum != sha256.Sum256(files["/d/stripes"]) {
				t.Fatalf("read by the restoring client with the backend stopped: %v", err)
			}
		})
	}
}

// TestRestoreLayoutLease restores released files through a client whose
// layout lease is a millisecond (client.Options.LayoutLease): the
// restorer writes under the data ID its restore lease gave it, which the
// lease must not replace with the file's (released) layout; a restorer
// that did asked for a restore of the file, its own, and waited for
// itself until its timeout (ADR 0023, addendum). Then it writes through
// a File opened before the restore and reads everything back.
func TestRestoreLayoutLease(t *testing.T) {
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "lease/")
	ctx := context.Background()
	c := newClientOpts(t, client.Options{Server: fs.addr, LayoutLease: time.Millisecond, FlushTimeout: 20 * time.Second})
	files := map[string][]byte{"/l/big": randomData(31, 9<<20+5), "/l/small": randomData(32, 150<<10)}
	releasedFiles(t, fs, c, files)
	held, err := c.OpenFile(ctx, "/l/small", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.HsmRestore(rctx, "/l/big"); err != nil {
		t.Fatalf("restore of /l/big: %v", err)
	}
	patch := randomData(33, 10<<10)
	if _, err := held.WriteAt(patch, 4096); err != nil {
		t.Fatal(err)
	}
	if err := held.Sync(); err != nil {
		t.Fatalf("write of released /l/small through a File opened before (restores it): %v", err)
	}
	copy(files["/l/small"][4096:], patch)
	for p, d := range files {
		got, err := readAllSluice(ctx, c, p)
		if err != nil || !bytes.Equal(got, d) {
			t.Fatalf("%s: %d bytes, %v; first difference at %d", p, len(got), err, firstDiff(got, d))
		}
		if st := hsmState(t, fs, p); st == "released" {
			t.Errorf("%s still released", p)
		}
	}
}

// TestRestoreOnce: two clients read the same released file at once; both
// get its bytes and exactly one of them copies it to the targets (the
// other waits on the lease in the HSM record). The backend is stopped
// until both have claimed the restore, so that the claims overlap.
func TestRestoreOnce(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c1 := restoringClient(t, fs.addr, 0)
	c2 := restoringClient(t, fs.addr, 0)
	files := map[string][]byte{"/f": randomData(31, 24<<20+5)}
	releasedFiles(t, fs, c1, files)
	be.proc.Pause(t)
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for _, c := range []*client.Client{c1, c2} {
		wg.Go(func() {
			sum, _, err := readSum(ctx, c, "/f")
			if err == nil && sum != sha256.Sum256(files["/f"]) {
				err = errors.New("wrong bytes")
			}
			errc <- err
		})
	}
	waitFor(t, "both clients claimed the restore", func() bool {
		return c1.RestoreStats().Claims >= 1 && c2.RestoreStats().Claims >= 1
	})
	be.proc.Resume()
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatalf("concurrent read: %v", err)
		}
	}
	waitArchived(t, fs, c1, files)
	// Both clients' jobs end once the file is archived.
	waitFor(t, "both restore jobs ended", func() bool {
		_, e1 := c1.RestoreIno(ctx, inoOf(t, c1, "/f"))
		_, e2 := c2.RestoreIno(ctx, inoOf(t, c2, "/f"))
		return e1 == nil && e2 == nil
	})
	s1, s2 := c1.RestoreStats(), c2.RestoreStats()
	if s1.Copied+s2.Copied != 1 || s1.Failed+s2.Failed != 0 || s1.Waits+s2.Waits == 0 {
		t.Fatalf("restores: client 1 %+v, client 2 %+v; want one copy in all", s1, s2)
	}
	checkOnTargets(t, fs, be, files)
}

func inoOf(t testing.TB, c *client.Client, p string) uint64 {
	t.Helper()
	fi, err := c.Stat(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Attr().Ino
}

// TestRestoreBeforeWrite: a write to a released file restores it first,
// then applies (content = the old bytes with the write), and the file is
// dirty; a truncate too. With the backend stopped the write fails clearly
// (unavailable) and the file stays released; once it is back, reads and
// writes work.
func TestRestoreBeforeWrite(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := restoringClient(t, fs.addr, 2*time.Second)
	old, cut, down := randomData(41, 5<<20+3), randomData(42, 3<<20), randomData(43, 2<<20+9)
	releasedFiles(t, fs, c, map[string][]byte{"/w": old, "/t": cut, "/down": down})

	patch := []byte("written over a released file")
	f, err := c.OpenFile(ctx, "/w", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	const at = 2<<20 + 100
	if _, err := f.WriteAt(patch, at); err != nil {
		t.Fatalf("write to released: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(old)
	copy(want[at:], patch)
	if sum, n, err := readSum(ctx, c, "/w"); err != nil || sum != sha256.Sum256(want) {
		t.Fatalf("after the write: %d bytes, %v; want the old bytes with the write", n, err)
	}
	if st := hsmState(t, fs, "/w"); st != "dirty" {
		t.Fatalf("after the write: %s, want dirty", st)
	}

	if err := c.Truncate(ctx, "/t", 1<<20+1); err != nil {
		t.Fatalf("truncate of released: %v", err)
	}
	if sum, _, err := readSum(ctx, c, "/t"); err != nil || sum != sha256.Sum256(cut[:1<<20+1]) {
		t.Fatalf("after the truncate: %v", err)
	}
	if st := hsmState(t, fs, "/t"); st != "dirty" {
		t.Fatalf("after the truncate: %s, want dirty", st)
	}

	be.proc.Pause(t)
	f, err = c.OpenFile(ctx, "/down", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(patch, 0)
	f.Close()
	if errs.CodeOf(err) != errs.Unavailable || !strings.Contains(err.Error(), "restore") {
		t.Fatalf("write with the backend stopped: %v; want unavailable, naming the restore", err)
	}
	_, _, err = readSum(ctx, c, "/down")
	if errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("read with the backend stopped: %v; want unavailable", err)
	}
	if st := hsmState(t, fs, "/down"); st != "released" {
		t.Fatalf("after the failed restore: %s, want released", st)
	}
	be.proc.Resume()
	if sum, _, err := readSum(ctx, c, "/down"); err != nil || sum != sha256.Sum256(down) {
		t.Fatalf("read once the backend is back: %v", err)
	}
	f, err = c.OpenFile(ctx, "/down", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(patch, 0); err != nil {
		t.Fatalf("write once the backend is back: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want = bytes.Clone(down)
	copy(want, patch)
	if sum, _, err := readSum(ctx, c, "/down"); err != nil || sum != sha256.Sum256(want) {
		t.Fatalf("after the write: %v", err)
	}
}

// TestTruncateReleasedToZero: cutting a released file to size 0 (a
// truncate, an O_TRUNC open through the library and through a mount)
// needs none of its bytes, so it works with the backend stopped: the file
// is empty and dirty, takes new bytes, reads them back and is archived
// again once the backend is back. A cut made while the release's chunk
// removal may still be queued falls back to a restore and is right too.
func TestTruncateReleasedToZero(t *testing.T) {
	requireFUSE(t)
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "z/")
	c := restoringClient(t, fs.addr, 2*time.Second)
	releasedFiles(t, fs, c, map[string][]byte{
		"/z/cut": randomData(91, 3<<20+5), "/z/otrunc": randomData(92, 150<<10), "/z/mount": randomData(93, 1<<20),
	})
	mp := mountFS(t, fs.addr, "--op-timeout", "60s")

	be.proc.Pause(t)
	if err := c.Truncate(ctx, "/z/cut", 0); err != nil {
		t.Fatalf("truncate to 0 of a released file, backend stopped: %v", err)
	}
	fresh := []byte("new bytes after a cut to zero")
	f, err := c.OpenFile(ctx, "/z/otrunc", client.O_RDWR|client.O_TRUNC, 0)
	if err != nil {
		t.Fatalf("O_TRUNC open of a released file, backend stopped: %v", err)
	}
	if _, err := f.WriteAt(fresh, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mp, "z", "mount"), fresh[:9], 0o644); err != nil {
		t.Fatalf("O_TRUNC write through the mount, backend stopped: %v", err)
	}
	want := map[string][]byte{"/z/cut": {}, "/z/otrunc": fresh, "/z/mount": fresh[:9]}
	for p, d := range want {
		if sum, n, err := readSum(ctx, c, p); err != nil || sum != sha256.Sum256(d) {
			t.Errorf("%s after the cut: %d bytes, %v; want %d new bytes", p, n, err, len(d))
		}
		if st := hsmState(t, fs, p); st != "dirty" {
			t.Errorf("%s after the cut: %s, want dirty", p, st)
		}
	}
	if got, err := os.ReadFile(filepath.Join(mp, "z", "otrunc")); err != nil || !bytes.Equal(got, fresh) {
		t.Errorf("read through the mount: %q, %v", got, err)
	}
	if s := c.RestoreStats(); s.Claims != 0 {
		t.Errorf("the cuts to zero claimed restores: %+v", s)
	}
	be.proc.Resume()
	fs.mustCLI("hsm", "archive", "/z/otrunc")
	if st := hsmState(t, fs, "/z/otrunc"); st != "archived" {
		t.Errorf("archived again: %s", st)
	}

	// Released and cut at once: the chunk removal may still be queued,
	// and the cut then restores first.
	old := randomData(94, 2<<20)
	if err := writeSluice(ctx, c, "/z/soon", old); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("hsm", "archive", "/z/soon")
	fs.mustCLI("hsm", "release", "/z/soon")
	if err := c.Truncate(ctx, "/z/soon", 0); err != nil {
		t.Fatalf("cut right after the release: %v", err)
	}
	if sum, n, err := readSum(ctx, c, "/z/soon"); err != nil || n != 0 || sum != sha256.Sum256(nil) {
		t.Fatalf("after the cut right after the release: %d bytes, %v", n, err)
	}
	if st := hsmState(t, fs, "/z/soon"); st != "dirty" {
		t.Errorf("after the cut right after the release: %s, want dirty", st)
	}
}

// TestRestoreTakeover: a client (`sluice hsm restore`, its own process)
// is killed with SIGKILL in the middle of a restore, holding the lease,
// its chunks sized but not written; a reader on another client gets the
// right bytes meanwhile (not the chunks' zeros), takes the restore over
// once the lease expires, and finishes it.
func TestRestoreTakeover(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := restoringClient(t, fs.addr, 0)
	files := map[string][]byte{"/big": randomData(51, 96<<20+7)}
	releasedFiles(t, fs, c, files)
	// The backend is stopped before the restore starts: the CLI claims
	// the lease and sizes the chunks, then waits on its GETs; it is
	// killed there, holding the lease.
	be.proc.Pause(t)
	cmd := exec.Command(binary, "hsm", "restore", "/big")
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+fs.addr)
	var logs syncLog
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGKILL); <-exited })
	var dead client.RestoreLease
	waitFor(t, "the CLI holding the restore lease", func() bool {
		select {
		case <-exited:
			t.Fatalf("hsm restore ended before it was killed: %s", logs.String())
		default:
		}
		var err error
		dead, err = c.HsmRestoring(ctx, "/big")
		if err != nil {
			t.Fatal(err)
		}
		return dead.Holder != 0
	})
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	if dead.Epoch != 1 || dead.Left == 0 {
		t.Fatalf("the CLI's lease: %+v; want a first grant, not expired", dead)
	}
	if st := hsmState(t, fs, "/big"); st != "released" {
		t.Fatalf("after kill -9 mid-restore: %s, want released", st)
	}
	be.proc.Resume()
	sum, _, err := readSum(ctx, c, "/big")
	if err != nil || sum != sha256.Sum256(files["/big"]) {
		t.Fatalf("read while the dead client holds the lease: %v", err)
	}
	waitArchived(t, fs, c, files)
	if l, err := c.HsmRestoring(ctx, "/big"); err != nil || l.Holder != 0 {
		t.Fatalf("lease after the restore: %+v, %v; want none", l, err)
	}
	// It waited on the dead client's lease, then copied once.
	if s := c.RestoreStats(); s.Copied != 1 || s.Waits == 0 {
		t.Fatalf("restores by the reader: %+v; want waits on the dead holder's lease, then one copy", s)
	}
	checkOnTargets(t, fs, be, files)
}

// TestMountRestore: through a real FUSE mount (`sluice mount`, its own
// process), a read of a released file returns its bytes and restores it,
// and a write to a released file restores it, then applies; with the
// backend stopped the write fails with EIO and a read succeeds once it is
// back.
func TestMountRestore(t *testing.T) {
	requireFUSE(t)
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "m/")
	c := newClient(t, fs.addr, 0)
	files := map[string][]byte{"/a": randomData(61, 7<<20+3), "/s": randomData(62, 150<<10)}
	w, down := randomData(63, 3<<20), randomData(64, 2<<20+1)
	releasedFiles(t, fs, c, map[string][]byte{"/a": files["/a"], "/s": files["/s"], "/w": w, "/down": down})
	mp := mountFS(t, fs.addr, "--op-timeout", "60s")
	for p, d := range files {
		got, err := os.ReadFile(filepath.Join(mp, p))
		if err != nil || sha256.Sum256(got) != sha256.Sum256(d) {
			t.Fatalf("read of released %s on the mount: %d bytes, %v", p, len(got), err)
		}
	}
	waitFor(t, "files archived after their read on the mount", func() bool {
		return hsmState(t, fs, "/a") == "archived" && hsmState(t, fs, "/s") == "archived"
	})
	checkOnTargets(t, fs, be, files)
	f, err := os.OpenFile(filepath.Join(mp, "w"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte("through the mount")
	if _, err := f.WriteAt(patch, 1<<20); err != nil {
		t.Fatalf("write to released on the mount: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(w)
	copy(want[1<<20:], patch)
	if sum, _, err := readSum(ctx, c, "/w"); err != nil || sum != sha256.Sum256(want) {
		t.Fatalf("after the write on the mount: %v", err)
	}
	if st := hsmState(t, fs, "/w"); st != "dirty" {
		t.Fatalf("after the write on the mount: %s, want dirty", st)
	}

	// With the backend stopped, a write to a released file fails with
	// EIO (on the write, or on the fsync if the kernel buffered it)
	// within the op timeout, and the file stays released.
	short := mountFS(t, fs.addr, "--op-timeout", "4s")
	be.proc.Pause(t)
	f, err = os.OpenFile(filepath.Join(short, "down"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(patch, 0)
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("write to released on the mount with the backend stopped: %v; want EIO", err)
	}
	if st := hsmState(t, fs, "/down"); st != "released" {
		t.Fatalf("after the failed write: %s, want released", st)
	}
	be.proc.Resume()
	got, err := os.ReadFile(filepath.Join(short, "down"))
	if err != nil || sha256.Sum256(got) != sha256.Sum256(down) {
		t.Fatalf("read once the backend is back: %d bytes, %v", len(got), err)
	}
}

// TestWriteWaitsForOtherRestore: a write on one client to a released file
// that another client is restoring waits for that restore (it does not
// copy the file again), then applies.
func TestWriteWaitsForOtherRestore(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	reader := restoringClient(t, fs.addr, 0)
	writer := restoringClient(t, fs.addr, 0)
	old := randomData(71, 6<<20+11)
	releasedFiles(t, fs, reader, map[string][]byte{"/f": old})
	be.proc.Pause(t) // the reader's restore holds the lease, its GETs waiting
	readErr := make(chan error, 1)
	go func() {
		sum, _, err := readSum(ctx, reader, "/f")
		if err == nil && sum != sha256.Sum256(old) {
			err = errors.New("wrong bytes")
		}
		readErr <- err
	}()
	waitFor(t, "the reader holding the restore lease", func() bool {
		l, err := reader.HsmRestoring(ctx, "/f")
		if err != nil {
			t.Fatal(err)
		}
		return l.Holder != 0
	})
	patch := []byte("written while another client restores")
	writeErr := make(chan error, 1)
	go func() {
		f, err := writer.OpenFile(ctx, "/f", client.O_RDWR, 0)
		if err != nil {
			writeErr <- err
			return
		}
		if _, err := f.WriteAt(patch, 4<<20); err != nil {
			f.Close()
			writeErr <- err
			return
		}
		writeErr <- f.Close()
	}()
	waitFor(t, "the writer waiting on the reader's lease", func() bool { return writer.RestoreStats().Waits > 0 })
	be.proc.Resume()
	if err := <-readErr; err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-writeErr; err != nil {
		t.Fatalf("write: %v", err)
	}
	want := bytes.Clone(old)
	copy(want[4<<20:], patch)
	if sum, _, err := readSum(ctx, writer, "/f"); err != nil || sum != sha256.Sum256(want) {
		t.Fatalf("after the write: %v; want the old bytes with the write", err)
	}
	if st := hsmState(t, fs, "/f"); st != "dirty" {
		t.Fatalf("after the write: %s, want dirty", st)
	}
	if r, w := reader.RestoreStats(), writer.RestoreStats(); r.Copied != 1 || w.Copied != 0 {
		t.Fatalf("restores: reader %+v, writer %+v; want one copy, by the reader", r, w)
	}
}

// TestReadRestoreSlots: 8 readers read 40 released files at once through
// a client with the default 2 read-restore slots: every read returns the
// file's bytes at once (from the bucket), no more than 2 restores run at
// any sample, the others wait, and every file ends restored, byte-exact
// on the targets. A write joining a queued restore runs it at once.
func TestReadRestoreSlots(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := restoringClient(t, fs.addr, 0)
	files := map[string][]byte{}
	var paths []string
	for i := range 40 {
		p := fmt.Sprintf("/slots/f%02d", i)
		files[p] = randomData(uint64(70+i), 150<<10+i)
		paths = append(paths, p)
	}
	releasedFiles(t, fs, c, files)
	var mu sync.Mutex
	maxRunning, sawWaiting := 0, false
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			s := c.RestoreStats()
			mu.Lock()
			maxRunning = max(maxRunning, s.Running)
			sawWaiting = sawWaiting || s.Waiting > 0
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	next := make(chan string)
	var readers sync.WaitGroup
	errc := make(chan error, len(paths))
	for range 8 {
		readers.Go(func() {
			for p := range next {
				if sum, n, err := readSum(ctx, c, p); err != nil || sum != sha256.Sum256(files[p]) {
					errc <- fmt.Errorf("read of released %s: %d bytes, %v", p, n, err)
				}
			}
		})
	}
	for _, p := range paths {
		next <- p
	}
	close(next)
	readers.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	// A write to a file whose restore may still wait runs it at once.
	last := paths[len(paths)-1]
	f, err := c.OpenFile(ctx, last, client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("write to released %s: %v", last, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	files[last] = append([]byte("x"), files[last][1:]...)
	waitArchivedOrDirty(t, c, files)
	close(stop)
	sampler.Wait()
	t.Logf("restores running at most %d at once; some waited: %v; %+v", maxRunning, sawWaiting, c.RestoreStats())
	if maxRunning > client.DefaultTierReadRestores+1 { // + the write's own
		t.Errorf("%d restores ran at once; want at most %d started by reads (+1 by the write)", maxRunning, client.DefaultTierReadRestores)
	}
	if !sawWaiting {
		t.Errorf("no restore ever waited for a read slot with 8 readers and 2 slots")
	}
	// The restores that waited wrote the objects their readers had
	// fetched (small files, fetched whole) instead of fetching them
	// again (what they wrote is checked on the targets below).
	if s := c.RestoreStats(); s.Reused == 0 {
		t.Errorf("no restore wrote a reader's bytes: %+v", s)
	}
	checkOnTargets(t, fs, be, files)
}

// waitArchivedOrDirty waits until no file is released any more.
func waitArchivedOrDirty(t testing.TB, c *client.Client, files map[string][]byte) {
	t.Helper()
	for p := range files {
		waitFor(t, p+" restored", func() bool {
			info, err := c.HsmState(context.Background(), p)
			return err == nil && info.State != "released"
		})
	}
}

// TestReadersShareFetches: four readers of one client read the same
// released 40 MiB file at once, sequentially, while the restore their
// reads started runs: every reader gets the file's bytes exactly, the
// file ends up archived with its bytes on the targets, and the reads and
// the restore took some of their ranged GETs from each other's
// (RestoreStats.Shared) instead of asking the backend for every segment
// once per consumer.
func TestReadersShareFetches(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "share/")
	c := restoringClient(t, fs.addr, 0)
	files := map[string][]byte{"/d/big": randomData(31, 40<<20+12345)}
	releasedFiles(t, fs, c, files)
	want := sha256.Sum256(files["/d/big"])
	var g errgroup.Group
	for range 4 {
		g.Go(func() error {
			sum, n, err := readSum(ctx, c, "/d/big")
			if err == nil && sum != want {
				err = fmt.Errorf("read %d bytes that differ from the file's", n)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	waitArchived(t, fs, c, files)
	s := c.RestoreStats()
	if s.Copied != 1 || s.Shared == 0 {
		t.Errorf("restore stats %+v: want one restore copied and fetches shared", s)
	}
	checkOnTargets(t, fs, be, files)
}
