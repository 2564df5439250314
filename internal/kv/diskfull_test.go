package kv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestCommitLogDiskFull runs the pebble engine on a small tmpfs and fills
// the disk with another file: commits go on in the log's reserve, then
// fail with ENOSPC without failing the store, succeed again once space is
// freed, and every acknowledged commit is there after a reopen.
func TestCommitLogDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		proctest.SkipMissing(t, "needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", dir).CombinedOutput(); err != nil {
		proctest.SkipMissing(t, "cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	ctx := context.Background()
	path := filepath.Join(dir, "db")
	db, err := OpenPebble(path, &PebbleOptions{MemTableSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	put := func(i int) error {
		return db.Update(ctx, func(tx Txn) error {
			tx.Set(fmt.Appendf(nil, "k%06d", i), make([]byte, 8<<10))
			return nil
		})
	}
	acked := 0
	for ; acked < 10; acked++ {
		if err := put(acked); err != nil {
			t.Fatal(err)
		}
	}
	// Fill the disk.
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err := filler.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// The reserve takes some commits; then they fail, cleanly.
	var failed error
	for ; acked < 10000; acked++ {
		if failed = put(acked); failed != nil {
			break
		}
	}
	if !errors.Is(failed, syscall.ENOSPC) {
		t.Fatalf("commit on a full disk: %v, want ENOSPC", failed)
	}
	t.Logf("%d commits acknowledged, the last ones in the reserve", acked)
	if err := put(acked); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit on a full disk again: %v, want ENOSPC", err)
	}
	// Space freed: the store works again.
	filler.Close()
	if err := os.Remove(filler.Name()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := put(acked); err != nil {
			t.Fatalf("commit after freeing space: %v", err)
		}
		acked++
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = OpenPebble(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range acked {
		if err := db.View(ctx, func(tx Txn) error {
			_, err := tx.Get(fmt.Appendf(nil, "k%06d", i))
			return err
		}); err != nil {
			t.Fatalf("acknowledged commit %d after reopen: %v", i, err)
		}
	}
}
