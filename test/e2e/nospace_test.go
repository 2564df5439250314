package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestDiskFull runs the server on a small tmpfs and fills it: the write
// that hits the full disk fails with a clear no-space error, everything
// stored before reads back intact, the server keeps serving, and space
// freed by a removal can be written again.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	proctest.MountTmpfs(t, dir, "64m")
	s := startServer(t, filepath.Join(dir, "data"))
	c := s.client()
	ctx := context.Background()

	small := randBytes(7, 5<<20)
	writeFile(t, c, "/small", small)

	local := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(local, randBytes(8, 100<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	msg := s.failCLI("no space left", "cp", local, "sluice:/big")
	if !strings.Contains(msg, "target") {
		t.Errorf("no-space error does not say where: %q", msg)
	}
	f, err := c.Create(ctx, "/big2")
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.Write(randBytes(9, 80<<20))
	cerr := f.Close()
	if err := errorsJoin(werr, cerr); errs.CodeOf(err) != errs.NoSpace {
		t.Fatalf("library write to a full disk: want a no-space error, got %v", err)
	}

	if got, err := readFile(c, "/small"); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("data stored before the disk filled is damaged: %v", err)
	}
	for _, p := range []string{"/big", "/big2"} {
		if err := c.Remove(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// The freed chunks are collected in the background; then writes fit.
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := c.Create(ctx, "/after")
		if err == nil {
			_, err = f.Write(small)
			err = errorsJoin(err, f.Close())
		}
		if err == nil {
			break
		}
		if errs.CodeOf(err) != errs.NoSpace || time.Now().After(deadline) {
			t.Fatalf("write after freeing space: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got, err := readFile(c, "/after"); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("file written after freeing space: %v", err)
	}
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
