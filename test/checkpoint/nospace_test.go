package checkpoint

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestStagingFull stages on a small tmpfs and fills it: the write that
// hits the full staging disk fails with a no-space error, what was
// acknowledged before drains intact, and once drained the space is there
// again.
func TestStagingFull(t *testing.T) {
	staging := t.TempDir()
	proctest.MountTmpfs(t, staging, "8m")
	_, addr := proctest.Start(t, binary, nil, regexp.MustCompile(`serving on (\S+)`),
		"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "")
	ctx := context.Background()
	other := proctest.Client(t, addr)
	if err := other.Mkdir(ctx, "/ckpt", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := other.SetAbsorb(ctx, "/ckpt", client.AbsorbOn); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: staging})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	small := shardData(9, 0)[:2<<20]
	if err := proctest.WriteFile(ctx, c, "/ckpt/a", small); err != nil {
		t.Fatal(err)
	}
	f, err := c.Create(ctx, "/ckpt/big")
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 16<<20)
	_, werr := f.Write(big)
	f.Close()
	if errs.CodeOf(werr) != errs.NoSpace {
		t.Fatalf("a write past the staging disk's space: %v (class %v), want no space", werr, errs.CodeOf(werr))
	}
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := readFile(ctx, other, "/ckpt/a")
	if err != nil || !bytes.Equal(got, small) {
		t.Fatalf("acknowledged file after the staging disk filled: %d bytes, %v", len(got), err)
	}
	// Drained: the staging disk has room again.
	if err := proctest.WriteFile(ctx, c, "/ckpt/b", small); err != nil {
		t.Fatalf("write after the drain freed the staging disk: %v", err)
	}
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := readFile(ctx, other, "/ckpt/b"); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("file written after the space came back: %d bytes, %v", len(got), err)
	}
}
