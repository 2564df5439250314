package checkpoint

import (
	"bytes"
	"context"
	"path"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestReadYourRenames: a client whose commit rename is queued behind its
// staged shards (the storage node paused, so nothing drains) does not
// see the new name's old file, nor miss the new one: its open of the
// committed name waits until the rename is carried out, then reads what
// it renamed there. Names the rename does not touch are not held up.
func TestReadYourRenames(t *testing.T) {
	cl, addr, other := absorbCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	oldData, newData := shardData(11, 0), shardData(11, 1)
	// The previous version of the file, committed and drained.
	if err := proctest.WriteFile(ctx, c, "/ckpt/model.tmp", oldData); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/ckpt/model.tmp", "/ckpt/model"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if err := proctest.WriteFile(ctx, c, "/ckpt/unrelated", []byte("x")); err != nil {
		t.Fatal(err)
	}

	drained := c.StagingStats().Drained
	node := cl.Nodes[0].Proc
	node.Pause(t)
	paused := true
	defer func() {
		if paused {
			node.Resume()
		}
	}()
	// The new version: staged, and its rename queued (it cannot drain).
	if err := proctest.WriteFile(ctx, c, "/ckpt/model.tmp", newData); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/ckpt/model.tmp", "/ckpt/model"); err != nil {
		t.Fatal(err)
	}
	if st := c.StagingStats(); st.RenamesQueued < 2 || st.Renamed != st.RenamesQueued-1 {
		t.Fatalf("staging %+v: want the second rename queued, not done", st)
	}
	// A name the rename does not touch resolves at once (the paused node
	// holds no metadata).
	if _, err := c.Stat(ctx, "/ckpt/unrelated"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		data []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		data, err := proctest.ReadFile(ctx, c, "/ckpt/model")
		got <- result{data, err}
	}()
	stat := make(chan error, 1)
	go func() {
		_, err := c.Stat(ctx, path.Join("/ckpt", "model.tmp"))
		stat <- err
	}()
	// Nothing drained while the node is paused, so neither can have
	// returned, however long this takes to look.
	if st := c.StagingStats(); st.Drained != drained {
		t.Fatalf("drained %d segments with the node paused, want the %d before only", st.Drained, drained)
	}
	select {
	case r := <-got:
		t.Fatalf("the open of the committed name returned before its rename: %d bytes, %v (old version: %v)", len(r.data), r.err, bytes.Equal(r.data, oldData))
	case err := <-stat:
		t.Fatalf("the stat of the renamed-away name returned before the rename: %v", err)
	default:
	}
	node.Resume()
	paused = false
	r := <-got
	if r.err != nil || !bytes.Equal(r.data, newData) {
		t.Fatalf("after the rename: %d bytes, %v; want the new version (old: %v)", len(r.data), r.err, bytes.Equal(r.data, oldData))
	}
	if err := <-stat; err == nil {
		t.Fatal("the renamed-away name still resolves after the rename")
	}

	// A removal of the committed name while its rename is queued removes
	// what the rename puts there, not the file it replaces: afterwards
	// the name is gone (without the wait, the queued rename brought it
	// back).
	node.Pause(t)
	paused = true
	if err := proctest.WriteFile(ctx, c, "/ckpt/model.tmp", shardData(11, 2)); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/ckpt/model.tmp", "/ckpt/model"); err != nil {
		t.Fatal(err)
	}
	removed := make(chan error, 1)
	go func() { removed <- c.Remove(ctx, "/ckpt/model") }()
	node.Resume()
	paused = false
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client.Client{c, other} {
		if _, err := cl.Stat(ctx, "/ckpt/model"); err == nil {
			t.Fatal("/ckpt/model exists after its removal: the queued rename brought it back")
		}
	}
}
