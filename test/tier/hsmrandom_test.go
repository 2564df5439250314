package tier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/fsx"
)

// TestHsmRandom runs random sequences of writes, truncates (a third of
// them to size 0), O_TRUNC rewrites, reads, archives, releases, restores,
// replacements by objects imported from the bucket's listing, changes and
// removals of those objects in the bucket followed by a re-run of the
// import (--delete), and checks of the bucket's copy on a few files through two clients that
// restore on read, against a model of every file's bytes. A third client
// keeps each file open across all of that and writes it now and then
// (ADR 0023: its layout goes stale under releases, restores and cuts),
// sometimes while another client releases the file: its write must land
// (restoring the file when the release won) and leave the file dirty.
// After each read the bytes must be the model's; whenever a file is
// archived or released its object in the bucket must be the model's bytes
// too (the state never claims a copy that is not the file). At the end
// every file is read by a new client, and those not released again with
// the backend stopped. The seed is printed; SLUICE_FSX_SEED and
// SLUICE_FSX_OPS replay or lengthen a run (SLUICE_FSX_LONG=1: a million
// operations); the races between the release and the writer are not
// replayed exactly.
func TestHsmRandom(t *testing.T) {
	plan, err := fsx.PlanFromEnv(400, 1)
	if err != nil {
		t.Fatal(err)
	}
	be := startSluiceBackend(t)
	// Fences of released chunks expire 2 s after the chunks go, and the
	// holder renews its layouts every 100 ms (ADR 0023, addendum).
	fs := startFS(t, "--chunk-fence-grace", "2s")
	addBackend(t, fs, be, "rnd/")
	c1 := restoringClient(t, fs.addr, 0)
	c2 := restoringClient(t, fs.addr, 0)
	holder := newClientOpts(t, client.Options{Server: fs.addr, LayoutLease: 100 * time.Millisecond})
	s3c := be.s3(t)
	for _, seed := range plan.Seeds {
		t.Logf("seed %d, %d operations (replay: SLUICE_FSX_SEED=%d SLUICE_FSX_OPS=%d go test -run TestHsmRandom ./test/tier)", seed, plan.Ops, seed, plan.Ops)
		hsmRandom(t, fs, be, s3c, []*client.Client{c1, c2}, holder, seed, plan.Ops)
	}
}

func hsmRandom(t *testing.T, fs *fsServer, be *backend, s3c *minio.Client, cs []*client.Client, holder *client.Client, seed uint64, ops int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	dir := fmt.Sprintf("/rnd-%d", seed)
	if err := cs[0].MkdirAll(ctx, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const nFiles = 4
	model := make([][]byte, nFiles)
	path := func(i int) string { return fmt.Sprintf("%s/f%d", dir, i) }
	for i := range model {
		model[i] = randomData(seed+uint64(i), 1<<20+rng.IntN(2<<20))
		if err := writeSluice(ctx, cs[0], path(i), model[i]); err != nil {
			t.Fatal(err)
		}
	}
	counts := map[string]int{}
	// imported[i]: the prefix file i was last imported from ("" once it
	// was not).
	imported := make([]string, nFiles)
	var op string
	fail := func(k int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, operation %d (%s): %s", seed, k, op, fmt.Sprintf(format, args...))
	}
	state := func(k, i int) client.HsmInfo {
		t.Helper()
		info, err := cs[0].HsmState(ctx, path(i))
		if err != nil {
			fail(k, "hsm state: %v", err)
		}
		return info
	}
	write := func(k, i int, off int64, b []byte, flag int) {
		t.Helper()
		c := cs[rng.IntN(len(cs))]
		f, err := c.OpenFile(ctx, path(i), client.O_RDWR|flag, 0)
		if err != nil {
			fail(k, "open: %v", err)
		}
		if _, err := f.WriteAt(b, off); err != nil {
			f.Close()
			fail(k, "write: %v", err)
		}
		if err := f.Close(); err != nil {
			fail(k, "close: %v", err)
		}
	}
	// waitRestores waits until no restore runs in the reading clients.
	waitRestores := func(k int) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
			idle := true
			for _, c := range cs {
				if rs := c.RestoreStats(); rs.Running+rs.Waiting > 0 {
					idle = false
				}
			}
			if idle {
				return
			}
			if time.Now().After(deadline) {
				fail(k, "restores still running after a minute")
			}
		}
	}
	// held[i]: file i as the holder keeps it open, across everything.
	held := make([]*client.File, nFiles)
	// importFile replaces file i by an object of bytes b a plain S3 client
	// put, imported from the bucket's listing (under a prefix of its own).
	importFile := func(k, i int, b []byte) {
		t.Helper()
		pfx := fmt.Sprintf("imp-%d-%d/", seed, k)
		if held[i] != nil {
			if err := held[i].Close(); err != nil {
				fail(k, "holder's close: %v", err)
			}
			held[i] = nil
		}
		if _, err := s3c.PutObject(ctx, bucket, "rnd/"+pfx+fmt.Sprintf("f%d", i), bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
			fail(k, "put: %v", err)
		}
		if err := cs[0].Remove(ctx, path(i)); err != nil {
			fail(k, "remove: %v", err)
		}
		if st, err := cs[0].TierImport(ctx, "t", pfx, dir, 1, nil); err != nil || st.Files != 1 {
			fail(k, "import: %+v, %v", st, err)
		}
		imported[i] = pfx
	}
	heldWrite := func(k, i int, off int64, b []byte) error {
		t.Helper()
		if held[i] == nil {
			f, err := holder.OpenFile(ctx, path(i), client.O_RDWR, 0)
			if err != nil {
				fail(k, "holder's open: %v", err)
			}
			held[i] = f
		}
		if _, err := held[i].WriteAt(b, off); err != nil {
			return fmt.Errorf("holder's write: %w", err)
		}
		if err := held[i].Sync(); err != nil {
			return fmt.Errorf("holder's sync: %w", err)
		}
		return nil
	}
	defer func() {
		for _, f := range held {
			if f != nil {
				f.Close()
			}
		}
	}()
	for k := range ops {
		i := rng.IntN(nFiles)
		m := model[i]
		switch r := rng.IntN(100); {
		case r < 20:
			off := rng.Int64N(int64(len(m)) + 64<<10)
			b := randomData(rng.Uint64(), 1+rng.IntN(256<<10))
			op = fmt.Sprintf("write %s at %d, %d bytes", path(i), off, len(b))
			write(k, i, off, b, 0)
			if end := off + int64(len(b)); end > int64(len(m)) {
				m = append(m, make([]byte, end-int64(len(m)))...)
			}
			copy(m[off:], b)
		case r < 32:
			size := int64(0)
			switch rng.IntN(3) {
			case 1:
				size = rng.Int64N(int64(len(m)) + 1)
			case 2:
				size = int64(len(m)) + rng.Int64N(1<<20)
			}
			op = fmt.Sprintf("truncate %s from %d to %d", path(i), len(m), size)
			if err := cs[rng.IntN(len(cs))].Truncate(ctx, path(i), size); err != nil {
				fail(k, "%v", err)
			}
			if size <= int64(len(m)) {
				m = m[:size]
			} else {
				m = append(m, make([]byte, size-int64(len(m)))...)
			}
		case r < 37:
			b := randomData(rng.Uint64(), 1+rng.IntN(512<<10))
			op = fmt.Sprintf("O_TRUNC rewrite of %s, %d bytes", path(i), len(b))
			write(k, i, 0, b, client.O_TRUNC)
			m = bytes.Clone(b)
		case r < 55:
			c := cs[rng.IntN(len(cs))]
			op = fmt.Sprintf("read %s", path(i))
			got, err := readAllSluice(ctx, c, path(i))
			if err != nil {
				fail(k, "%v", err)
			}
			if !bytes.Equal(got, m) {
				fail(k, "read %d bytes, want the model's %d (first difference at %d)", len(got), len(m), firstDiff(got, m))
			}
		case r < 66:
			// The holder writes through the File it keeps open; now and
			// then another client releases the file at the same time.
			off := rng.Int64N(int64(len(m)) + 64<<10)
			b := randomData(rng.Uint64(), 1+rng.IntN(256<<10))
			racing := r >= 61
			op = fmt.Sprintf("held write of %s at %d, %d bytes", path(i), off, len(b))
			before := state(k, i).State
			if racing {
				op = fmt.Sprintf("held-release race: write of %s at %d, %d bytes, beside its release", path(i), off, len(b))
				if st := state(k, i).State; st == "resident" || st == "dirty" {
					if _, err := cs[0].HsmArchive(ctx, path(i), ""); err != nil {
						fail(k, "archive: %v", err)
					}
				}
			}
			var relErr error
			var wg sync.WaitGroup
			if racing {
				wg.Go(func() { _, relErr = cs[1].HsmRelease(ctx, path(i)) })
			}
			werr := heldWrite(k, i, off, b)
			wg.Wait()
			if werr != nil {
				fail(k, "%v (release beside it: %v)", werr, relErr)
			}
			if end := off + int64(len(b)); end > int64(len(m)) {
				m = append(m, make([]byte, end-int64(len(m)))...)
			}
			copy(m[off:], b)
			switch code := errs.CodeOf(relErr); {
			case !racing:
			case relErr == nil:
				counts["race: release won"]++
			case code == errs.Busy:
				counts["race: release refused"]++
			case code == errs.Invalid && len(m) <= 64<<10:
				counts["race: release refused (inline)"]++
			default:
				fail(k, "release beside the write: %v", relErr)
			}
			// Whichever came first, the write's commit came after the
			// archive: the copy is not the file any more.
			if st := state(k, i).State; st != "dirty" && (racing || before != "resident") {
				fail(k, "after the holder's write the file (%s before) is %s, want dirty", before, st)
			}
		case r < 74:
			op = fmt.Sprintf("archive %s", path(i))
			if st := state(k, i).State; st == "released" || st == "archived" {
				counts["archive skipped"]++
				break
			}
			if _, err := cs[0].HsmArchive(ctx, path(i), ""); err != nil {
				fail(k, "%v", err)
			}
		case r < 86:
			// Archived first when it is not: files spend a good part of
			// the run released.
			op = fmt.Sprintf("release %s", path(i))
			switch state(k, i).State {
			case "released":
				counts["release skipped"]++
				continue
			case "resident", "dirty":
				if _, err := cs[0].HsmArchive(ctx, path(i), ""); err != nil {
					fail(k, "archive: %v", err)
				}
			}
			if _, err := cs[1].HsmRelease(ctx, path(i)); err != nil {
				// Files kept inline are archived, never released.
				if errs.CodeOf(err) != errs.Invalid || len(m) > 64<<10 {
					fail(k, "%v", err)
				}
				counts["release refused (inline)"]++
			}
		case r < 93:
			op = fmt.Sprintf("restore %s", path(i))
			if _, err := cs[rng.IntN(len(cs))].HsmRestore(ctx, path(i)); err != nil {
				fail(k, "%v", err)
			}
		case r < 95:
			// The file is replaced by an object a plain S3 client put,
			// imported from the bucket's listing (released, its reads
			// pinned to the object's ETag until a restore takes its
			// block checksums).
			b := randomData(rng.Uint64(), 1+rng.IntN(3<<20))
			op = fmt.Sprintf("import %s from the listing, %d bytes", path(i), len(b))
			importFile(k, i, b)
			m = bytes.Clone(b)
		case r < 98:
			// The object an imported file was made of changes in the
			// bucket, or is removed, and the import runs again (with
			// --delete): a file still released follows the object (the
			// new bytes; or it is removed, and made again here), a
			// restored one keeps its bytes and becomes dirty, a dirty
			// one keeps them.
			remove := rng.IntN(2) == 0
			op = fmt.Sprintf("change the object of %s in the bucket (removed %v), import again", path(i), remove)
			if info := state(k, i); imported[i] == "" || info.Gen != 0 || info.Key != fmt.Sprintf("%sf%d", imported[i], i) || info.State == "resident" {
				// Not an import (any more): imported now, and restored
				// or also written now and then.
				m = randomData(rng.Uint64(), 1+rng.IntN(3<<20))
				importFile(k, i, m)
				switch rng.IntN(3) {
				case 1:
					if _, err := cs[0].HsmRestore(ctx, path(i)); err != nil {
						fail(k, "restore: %v", err)
					}
				case 2:
					off := rng.Int64N(int64(len(m)))
					b := randomData(rng.Uint64(), 1+rng.IntN(64<<10))
					write(k, i, off, b, 0)
					if end := off + int64(len(b)); end > int64(len(m)) {
						m = append(m, make([]byte, end-int64(len(m)))...)
					}
					copy(m[off:], b)
				}
			}
			pfx := imported[i]
			key := fmt.Sprintf("%sf%d", pfx, i)
			if held[i] != nil {
				if err := held[i].Close(); err != nil {
					fail(k, "holder's close: %v", err)
				}
				held[i] = nil
			}
			// No restore runs (its lease would keep the file as it is).
			waitRestores(k)
			info := state(k, i)
			var b []byte
			if remove {
				if err := s3c.RemoveObject(ctx, bucket, "rnd/"+key, minio.RemoveObjectOptions{}); err != nil {
					fail(k, "remove the object: %v", err)
				}
			} else {
				b = randomData(rng.Uint64(), 1+rng.IntN(3<<20))
				if _, err := s3c.PutObject(ctx, bucket, "rnd/"+key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
					fail(k, "put: %v", err)
				}
			}
			st, err := cs[1].TierImportWith(ctx, "t", pfx, dir, client.ImportOptions{Parallel: 2, Delete: true})
			if err != nil {
				fail(k, "import again: %+v, %v", st, err)
			}
			counts[fmt.Sprintf("bucket change (removed %v) of a %s file", remove, info.State)]++
			switch want := map[bool]map[string]client.ImportStats{
				false: {"released": {Updated: 1}, "archived": {Changed: 1}, "dirty": {Changed: 1}},
				true:  {"released": {Removed: 1}, "archived": {Orphaned: 1}, "dirty": {}},
			}[remove][info.State]; {
			case st != want:
				fail(k, "import again of the %s file: %+v, want %+v", info.State, st, want)
			case info.State == "released" && remove:
				if _, err := cs[0].Stat(ctx, path(i)); errs.CodeOf(err) != errs.NotFound {
					fail(k, "the released file of the removed object: %v, want it removed", err)
				}
				// Over the inline limit: a new file's first bytes
				// would stay inline, and such a file is never released.
				m = randomData(rng.Uint64(), 64<<10+1+rng.IntN(1<<20))
				if err := writeSluice(ctx, cs[0], path(i), m); err != nil {
					fail(k, "write the file again: %v", err)
				}
				imported[i] = ""
			case info.State == "released":
				m = b
			default:
				if got := state(k, i).State; got != "dirty" {
					fail(k, "the %s file after the import: %s, want dirty", info.State, got)
				}
				imported[i] = ""
			}
		default:
			op = fmt.Sprintf("check the bucket's copy of %s", path(i))
			info := state(k, i)
			if info.State != "archived" && info.State != "released" {
				counts["copy check skipped"]++
				break
			}
			obj, err := s3c.GetObject(ctx, bucket, "rnd/"+info.Key, minio.GetObjectOptions{})
			if err != nil {
				fail(k, "get: %v", err)
			}
			got, err := io.ReadAll(obj)
			obj.Close()
			if err != nil {
				fail(k, "get: %v", err)
			}
			if !bytes.Equal(got, m) {
				fail(k, "%s file, its object holds %d bytes, not the file's %d (first difference at %d)", info.State, len(got), len(m), firstDiff(got, m))
			}
		}
		model[i] = m
		counts[op[:stringsIndexSpace(op)]]++
	}
	op = "final check"
	for i, f := range held {
		if f != nil {
			if err := f.Close(); err != nil {
				fail(ops, "holder's close of %s: %v", path(i), err)
			}
			held[i] = nil
		}
	}
	fresh := newClient(t, fs.addr, 0)
	var onTargets []int
	for i, m := range model {
		got, err := readAllSluice(ctx, fresh, path(i))
		if err != nil || !bytes.Equal(got, m) {
			fail(ops, "%s: %d bytes, %v; want the model's %d", path(i), len(got), err, len(m))
		}
		if state(ops, i).State != "released" {
			onTargets = append(onTargets, i)
		}
	}
	be.proc.Pause(t)
	for _, i := range onTargets {
		got, err := readAllSluice(ctx, newClient(t, fs.addr, 0), path(i))
		if err != nil || !bytes.Equal(got, model[i]) {
			fail(ops, "%s with the backend stopped: %d bytes, %v", path(i), len(got), err)
		}
	}
	be.proc.Resume()
	t.Logf("seed %d: %d operations: %v", seed, ops, counts)
}

// readAllSluice reads the file at p whole through c.
func readAllSluice(ctx context.Context, c *client.Client, p string) ([]byte, error) {
	f, err := c.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// firstDiff returns the first offset where a and b differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func stringsIndexSpace(s string) int {
	if i := bytes.IndexByte([]byte(s), ' '); i >= 0 {
		return i
	}
	return len(s)
}
