package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-fs/sluice/internal/errs"
)

// These tests simulate power loss with pebble's crashable in-memory file
// system: CrashClone keeps what was synced (files and directory entries)
// and, at random, some of what was not.

const plDir = "db"

func openOn(t *testing.T, fs vfs.FS, o PebbleOptions) *db {
	t.Helper()
	// The data dir exists durably before the store is made in it, as
	// with sluice serve's.
	if err := fs.MkdirAll(plDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syncDir(fs, ""); err != nil {
		t.Fatal(err)
	}
	o.FS = fs
	d, err := OpenPebble(plDir, &o)
	if err != nil {
		t.Fatalf("OpenPebble: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d.(*db)
}

// step i writes k<i> and last = i in one transaction, so the commits that
// survive are exactly k0..k<last> if the store is a prefix of its history.
func step(t *testing.T, d DB, i int, requireSync bool) {
	t.Helper()
	err := d.Update(t.Context(), func(tx Txn) error {
		tx.Set(fmt.Appendf(nil, "k%06d", i), fmt.Appendf(nil, "v%d-%s", i, pad))
		tx.Set([]byte("last"), []byte(strconv.Itoa(i)))
		if requireSync {
			tx.RequireSync()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("update %d: %v", i, err)
	}
}

var pad = string(make([]byte, 200))

// survivors opens the crashed copy and returns how many steps survived,
// failing unless they are a prefix 0..n-1 of the steps.
func survivors(t *testing.T, fs vfs.FS, steps int) int {
	t.Helper()
	d, err := OpenPebble(plDir, &PebbleOptions{FS: fs})
	if err != nil {
		t.Fatalf("open after power loss: %v", err)
	}
	defer d.Close()
	n := 0
	err = d.View(t.Context(), func(tx Txn) error {
		v, err := tx.Get([]byte("last"))
		switch {
		case errors.Is(err, ErrNotFound):
			n = 0
		case err != nil:
			return err
		default:
			last, err := strconv.Atoi(string(v))
			if err != nil {
				return err
			}
			n = last + 1
		}
		for i := range steps {
			v, err := tx.Get(fmt.Appendf(nil, "k%06d", i))
			switch {
			case i < n && err != nil:
				return fmt.Errorf("step %d is missing, but step %d survived: %w", i, n-1, err)
			case i < n && string(v) != fmt.Sprintf("v%d-%s", i, pad):
				return fmt.Errorf("step %d reads back %.20q", i, v)
			case i >= n && err == nil:
				return fmt.Errorf("step %d survived, but last says %d", i, n-1)
			case i >= n && !errors.Is(err, ErrNotFound):
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// crash returns the file system as a power loss now could leave it.
func crash(fs *vfs.MemFS, rng *rand.Rand, unsyncedPercent int) *vfs.MemFS {
	cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: unsyncedPercent}
	if unsyncedPercent > 0 {
		cfg.RNG = rng
	}
	return fs.CrashClone(cfg)
}

// TestPowerLossKeepsSyncedCommits: under SyncGroup with a window too long
// to matter, commits acknowledged before a Sync survive a power loss;
// later ones may be lost, but what survives is always a prefix.
func TestPowerLossKeepsSyncedCommits(t *testing.T) {
	t.Parallel()
	fs := vfs.NewCrashableMem()
	d := openOn(t, fs, PebbleOptions{SyncWindow: time.Minute})
	const synced, steps = 40, 100
	for i := range synced {
		step(t, d, i, false)
	}
	if err := d.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := synced; i < steps; i++ {
		step(t, d, i, false)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	if n := survivors(t, crash(fs, rng, 0), steps); n != synced {
		t.Errorf("with nothing unsynced kept, %d steps survived, want exactly the %d synced", n, synced)
	}
	for _, pct := range []int{10, 50, 90, 100} {
		for range 3 {
			n := survivors(t, crash(fs, rng, pct), steps)
			if n < synced {
				t.Errorf("%d%% of unsynced data kept: %d steps survived, fewer than the %d synced", pct, n, synced)
			}
			if pct == 100 && n != steps {
				t.Errorf("all unsynced data kept: %d steps survived, want %d", n, steps)
			}
		}
	}
}

// TestPowerLossWindow: a commit that nobody syncs is durable once the
// syncer's next run after it is done.
func TestPowerLossWindow(t *testing.T) {
	t.Parallel()
	fs := vfs.NewCrashableMem()
	d := openOn(t, fs, PebbleOptions{SyncWindow: 20 * time.Millisecond})
	step(t, d, 0, false)
	waitSynced(t, d)
	if n := survivors(t, crash(fs, nil, 0), 1); n != 1 {
		t.Fatalf("a commit the syncer synced was lost (%d steps survived)", n)
	}
	if d.SyncStats() == 0 {
		t.Fatal("the syncer reports no syncs")
	}
}

// waitSynced waits until the syncer has synced every commit acknowledged
// so far (the test's deadline bounds it; no time is asserted).
func waitSynced(t *testing.T, d *db) {
	t.Helper()
	d.syncer.mu.Lock()
	target := d.syncer.mu.st.committed
	d.syncer.mu.Unlock()
	for {
		d.syncer.mu.Lock()
		done := d.syncer.mu.st.synced >= target
		d.syncer.mu.Unlock()
		if done {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPowerLossRequireSync: a transaction that asks for it is durable when
// Update returns, and so is every commit before it.
func TestPowerLossRequireSync(t *testing.T) {
	t.Parallel()
	fs := vfs.NewCrashableMem()
	d := openOn(t, fs, PebbleOptions{SyncWindow: time.Minute})
	step(t, d, 0, false)
	step(t, d, 1, true)
	step(t, d, 2, false)
	if n := survivors(t, crash(fs, nil, 0), 3); n != 2 {
		t.Fatalf("%d steps survived, want 2 (the one that required a sync and the one before)", n)
	}
}

// TestPowerLossAlways: under SyncAlways every acknowledged commit is
// durable.
func TestPowerLossAlways(t *testing.T) {
	t.Parallel()
	fs := vfs.NewCrashableMem()
	d := openOn(t, fs, PebbleOptions{Sync: SyncAlways})
	for i := range 5 {
		step(t, d, i, false)
		if n := survivors(t, crash(fs, nil, 0), 5); n != i+1 {
			t.Fatalf("after step %d, %d steps survived", i, n)
		}
	}
	if err := d.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestPowerLossAcrossFlushes crashes at random moments of a long run with
// tiny log segments and memtables, so that segments rotate, pebble flushes
// tables (syncing the log first) and old segments are removed while
// commits go on: every synced commit survives, the rest is a prefix, and
// the store always opens.
func TestPowerLossAcrossFlushes(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	t.Parallel()
	fs := vfs.NewCrashableMem()
	d := openOn(t, fs, PebbleOptions{SyncWindow: time.Minute, LogSegmentSize: 64 << 10, MemTableSize: 32 << 10})
	rng := rand.New(rand.NewPCG(3, 4))
	const steps = 3000
	synced := 0
	for i := range steps {
		step(t, d, i, false)
		if rng.IntN(100) == 0 {
			if err := d.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			synced = i + 1
		}
		if rng.IntN(150) == 0 {
			n := survivors(t, crash(fs, rng, rng.IntN(101)), i+1)
			if n < synced {
				t.Fatalf("after step %d: %d steps survived, fewer than the %d synced", i, n, synced)
			}
		}
	}
	l := d.st.(*pebbleStore).log
	l.mu.Lock()
	segs := l.mu.num
	l.mu.Unlock()
	if segs < 8 {
		t.Errorf("only %d log segments were started: the test did not exercise rotation", segs)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if n := survivors(t, fs, steps); n != steps {
		t.Fatalf("after a clean close, %d of %d steps", n, steps)
	}
	// survivors reopened the store: it replayed the log, flushed, removed
	// the old segments, started a new one, and closed.
	names, err := fs.List(fs.PathJoin(plDir, commitLogDir))
	if err != nil || len(names) != 1 {
		t.Fatalf("commit log after reopening: %v, %v; want one new segment", names, err)
	}
}

// TestCommitLogCorruptionInOlderSegment: a bad record is a torn tail only
// in the newest segment; in an older one it is corruption.
func TestCommitLogCorruptionInOlderSegment(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	l, err := openCommitLog(fs, "log", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.start(1); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"one", "two"} {
		if err := l.append([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.rotate(); err != nil {
		t.Fatal(err)
	}
	if err := l.append([]byte("three")); err != nil {
		t.Fatal(err)
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	read := func() ([]string, error) {
		var got []string
		_, err := l.replay(func(p []byte) error { got = append(got, string(p)); return nil })
		return got, err
	}
	if got, err := read(); err != nil || fmt.Sprint(got) != "[one two three]" {
		t.Fatalf("replay = %v, %v", got, err)
	}
	flip := func(seg uint64, off int64) {
		t.Helper()
		f, err := fs.OpenReadWrite(fs.PathJoin("log", segmentName(seg)), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0xff
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	lastByte := int64(segmentHeaderSize + recordHeaderSize + len("three") - 1)
	flip(2, lastByte)
	if got, err := read(); err != nil || fmt.Sprint(got) != "[one two]" {
		t.Fatalf("replay with a torn last record = %v, %v; want [one two], nil", got, err)
	}
	flip(1, int64(segmentHeaderSize+recordHeaderSize))
	if _, err := read(); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("replay with a bad record in an older segment = %v, want a corruption error", err)
	}
}

// TestSyncAfterClose: Sync on a closed DB fails with ErrClosed.
func TestPebbleSyncAfterClose(t *testing.T) {
	t.Parallel()
	d := openOn(t, vfs.NewMem(), PebbleOptions{})
	step(t, d, 0, false)
	if err := d.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := d.Sync(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close = %v, want ErrClosed", err)
	}
}
