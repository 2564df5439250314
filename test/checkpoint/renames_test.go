package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestReadYourRenames: a client whose commit rename is queued behind its
// staged shards (the storage node paused, so nothing drains) sees it done
// at once: the committed name is the new version, never the file it
// replaces, and the old name is gone; a removal of the committed name
// waits for the rename and removes what it put there.
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
	// Staged too: drained (inline, to the metadata service, which stays
	// up) before the count below is taken.
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}

	drained := c.StagingStats().Drained
	node := cl.Nodes[0].Proc
	node.Pause(t)
	defer node.Resume()
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
	// Both names look renamed to this client at once, with the node
	// paused (it holds no metadata): the new name is the new version
	// (its staged size), the old one is gone, and an unrelated one is
	// there.
	if fi, err := c.Stat(ctx, "/ckpt/model"); err != nil || fi.Size() != int64(len(newData)) {
		t.Fatalf("stat of the committed name while its rename is queued: %v, %v; want size %d", fi, err, len(newData))
	}
	if _, err := c.Stat(ctx, "/ckpt/model.tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of the renamed-away name while the rename is queued: %v, want not found", err)
	}
	if _, err := c.Stat(ctx, "/ckpt/unrelated"); err != nil {
		t.Fatal(err)
	}
	// A listing shows the same: model (as the new version), not
	// model.tmp.
	ents, err := c.ReadDirAll(ctx, "/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]uint64{}
	for _, e := range ents {
		listed[e.Name] = e.Ino
	}
	if fi, _ := c.Stat(ctx, "/ckpt/model"); listed["model"] != fi.Attr().Ino {
		t.Fatalf("listing while the rename is queued: %v; want model as inode %d", listed, fi.Attr().Ino)
	}
	if _, ok := listed["model.tmp"]; ok || listed["unrelated"] == 0 {
		t.Fatalf("listing while the rename is queued: %v; want no model.tmp, and unrelated", listed)
	}
	// Its bytes are staged: a read waits for their drain, then reads the
	// new version, never the one the rename replaces.
	type result struct {
		data []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		data, err := proctest.ReadFile(ctx, c, "/ckpt/model")
		got <- result{data, err}
	}()
	if st := c.StagingStats(); st.Drained != drained {
		t.Fatalf("drained %d segments with the node paused, want the %d before only", st.Drained, drained)
	}
	node.Resume()
	r := <-got
	if r.err != nil || !bytes.Equal(r.data, newData) {
		t.Fatalf("read of the committed name: %d bytes, %v; want the new version (old: %v)", len(r.data), r.err, bytes.Equal(r.data, oldData))
	}
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, "/ckpt/model.tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the renamed-away name after the rename: %v, want not found", err)
	}

	// A removal of the committed name while its rename is queued removes
	// what the rename puts there, not the file it replaces: afterwards
	// the name is gone (without the wait, the queued rename brought it
	// back).
	node.Pause(t)
	if err := proctest.WriteFile(ctx, c, "/ckpt/model.tmp", shardData(11, 2)); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/ckpt/model.tmp", "/ckpt/model"); err != nil {
		t.Fatal(err)
	}
	removed := make(chan error, 1)
	go func() { removed <- c.Remove(ctx, "/ckpt/model") }()
	node.Resume()
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

// TestReadYourRenamesSymlink: a path through a symbolic link to a name
// that a queued rename of this client makes ("latest" to a checkpoint
// directory renamed into place, its shards not drained) resolves as this
// client sees the namespace, as the mount's lookups do.
func TestReadYourRenamesSymlink(t *testing.T) {
	cl, addr, _ := absorbCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data, old, fresh := shardData(12, 0), shardData(13, 0), shardData(14, 0)
	// A file that a queued rename will replace, committed and drained.
	if err := proctest.WriteFile(ctx, c, "/ckpt/m", old); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	oldFile, err := c.Stat(ctx, "/ckpt/m")
	if err != nil {
		t.Fatal(err)
	}
	node := cl.Nodes[0].Proc
	node.Pause(t)
	defer node.Resume()
	if err := c.Mkdir(ctx, "/ckpt/tmp7", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := proctest.WriteFile(ctx, c, "/ckpt/tmp7/model", data); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/ckpt/tmp7", "/ckpt/step7"); err != nil {
		t.Fatal(err)
	}
	if st := c.StagingStats(); st.Renamed == st.RenamesQueued {
		t.Fatalf("staging %+v: want the rename queued", st)
	}
	for _, target := range []string{"step7", "/ckpt/step7"} {
		if err := c.Symlink(ctx, target, "/ckpt/latest"); err != nil {
			t.Fatal(err)
		}
		fi, err := c.Stat(ctx, "/ckpt/latest/model")
		if err != nil || fi.Size() != int64(len(data)) {
			t.Fatalf("stat through a link to %s while its rename is queued: %v, %v; want size %d", target, fi, err, len(data))
		}
		if fi, err := c.Stat(ctx, "/ckpt/latest"); err != nil || !fi.IsDir() {
			t.Fatalf("stat of the link to %s: %v, %v; want the directory", target, fi, err)
		}
		if _, err := c.Stat(ctx, "/ckpt/latest/none"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stat of a name absent through the link: %v, want not found", err)
		}
		if err := c.Remove(ctx, "/ckpt/latest"); err != nil {
			t.Fatal(err)
		}
	}
	// A link to a file that a queued rename replaces: the new one.
	if err := proctest.WriteFile(ctx, c, "/ckpt/m.tmp", fresh); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/ckpt/m.tmp", "/ckpt/m"); err != nil {
		t.Fatal(err)
	}
	if err := c.Symlink(ctx, "m", "/ckpt/cur"); err != nil {
		t.Fatal(err)
	}
	newFile, err := c.Stat(ctx, "/ckpt/m")
	if err != nil || newFile.Attr().Ino == oldFile.Attr().Ino {
		t.Fatalf("stat of the name a queued rename replaces: %v, %v; want the new file, not inode %d", newFile, err, oldFile.Attr().Ino)
	}
	if fi, err := c.Stat(ctx, "/ckpt/cur"); err != nil || fi.Attr().Ino != newFile.Attr().Ino || fi.Size() != int64(len(fresh)) {
		t.Fatalf("stat through a link to a file a queued rename replaces: %v, %v; want the new file (inode %d, %d bytes), not the old one (inode %d)",
			fi, err, newFile.Attr().Ino, len(fresh), oldFile.Attr().Ino)
	}
	if fi, err := c.Lstat(ctx, "/ckpt/cur"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("lstat of the link: %v, %v", fi, err)
	}
	if err := c.Symlink(ctx, "step7/model", "/ckpt/latest"); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		b, err := proctest.ReadFile(ctx, c, "/ckpt/latest")
		if err == nil && !bytes.Equal(b, data) {
			err = fmt.Errorf("read %d bytes, not the file's %d", len(b), len(data))
		}
		got <- err
	}()
	node.Resume()
	if err := <-got; err != nil {
		t.Fatalf("read through a link to a file below the renamed directory: %v", err)
	}
}
