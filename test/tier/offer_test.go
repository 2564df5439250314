package tier

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// TestRestoreOfferAfterRefresh: a reader's whole fetch of an imported
// object, offered to the file's queued restore, is not written by that
// restore once a re-run of the import made the file another object of the
// same size (every import is generation 0: the offer must name the ETag
// too). The client has one read-restore slot, held by the restore of a
// file on a second backend that is stopped meanwhile, so the queued
// restore runs only after the re-run; the file must then hold the new
// object's bytes.
func TestRestoreOfferAfterRefresh(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	slow := startVersity(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	fs.mustCLI("tier", "add", "slow", "--endpoint", slow.endpoint, "--bucket", bucket, "--region", "us-east-1")
	c := newClientOpts(t, client.Options{Server: fs.addr, TierReadRestores: 1, TierTimeout: time.Minute})
	s3c := be.s3(t)

	// x: released to the slow backend; y: imported from the other.
	x := randomData(101, 2<<20)
	if err := writeSluice(ctx, c, "/x", x); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HsmArchive(ctx, "/x", "slow"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HsmRelease(ctx, "/x"); err != nil {
		t.Fatal(err)
	}
	y1, y2 := randomData(102, 300<<10), randomData(103, 300<<10)
	putObject(t, s3c, "src/y", y1)
	if st, err := c.TierImport(ctx, "t", "src/", "/", 1, nil); err != nil || st.Files != 1 {
		t.Fatalf("import: %+v, %v", st, err)
	}

	// A read of x starts its restore, which takes the only slot and
	// hangs on the stopped backend.
	slow.proc.Pause(t)
	defer slow.proc.Resume()
	fx, err := c.Open(ctx, "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	xread := make(chan error, 1)
	go func() {
		_, err := fx.ReadAt(make([]byte, 4096), 0)
		xread <- err
	}()
	waitStats(t, c, func(rs client.RestoreStats) bool { return rs.Running == 1 && rs.Waiting == 0 })

	// A whole read of y: its restore waits for the slot, and is offered
	// the bytes the read fetched (y1).
	fy, err := c.Open(ctx, "/y")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(y1))
	if _, err := fy.ReadAt(got, 0); err != nil || !bytes.Equal(got, y1) {
		t.Fatalf("read of /y: %v, equal %v", err, bytes.Equal(got, y1))
	}
	fy.Close()
	if rs := c.RestoreStats(); rs.Waiting != 1 {
		t.Fatalf("restores after the read of /y: %+v; want one waiting for the slot", rs)
	}

	// The object is replaced by another of the same size; the re-run
	// makes the released file the new object.
	putObject(t, s3c, "src/y", y2)
	if st, err := c.TierImportWith(ctx, "t", "src/", "/", client.ImportOptions{Parallel: 1}); err != nil || st.Updated != 1 {
		t.Fatalf("import again: %+v, %v; want /y updated", st, err)
	}

	slow.proc.Resume()
	if err := <-xread; err != nil {
		t.Fatalf("read of /x once its backend runs again: %v", err)
	}
	if info, err := c.HsmRestore(ctx, "/y"); err != nil || info.State != "archived" {
		t.Fatalf("restore of /y: %+v, %v", info, err)
	}
	for p, want := range map[string][]byte{"/y": y2, "/x": x} {
		got, err := readAll(ctx, newClient(t, fs.addr, 0), p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s restored: %d bytes, %v; want the current object's %d bytes (first difference at %d)", p, len(got), err, len(want), firstDiff(got, want))
		}
	}
	if rs := c.RestoreStats(); rs.Reused != 0 {
		t.Fatalf("restores: %+v; want no offered object reused", rs)
	}
}

// waitStats waits until c's restore counts satisfy ok.
func waitStats(t *testing.T, c *client.Client, ok func(client.RestoreStats) bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(c.RestoreStats()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("restores: %+v after a minute", c.RestoreStats())
		}
	}
}

// TestReadFollowsNewCopy: a descriptor of a released file whose copy was
// replaced (restored, rewritten, archived and released again: the new
// copy written over the old one's object) reads the file's new bytes if it had read nothing, and
// fails with ESTALE if it had read the old copy; neither mixes the two.
func TestReadFollowsNewCopy(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClientOpts(t, client.Options{Server: fs.addr})
	v1, v2 := randomData(111, 2<<20), randomData(112, 2<<20)
	if err := writeSluice(ctx, c, "/f", v1); err != nil {
		t.Fatal(err)
	}
	archiveRelease := func() {
		t.Helper()
		if _, err := c.HsmArchive(ctx, "/f", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.HsmRelease(ctx, "/f"); err != nil {
			t.Fatal(err)
		}
	}
	archiveRelease()
	rc := newClient(t, fs.addr, 0) // restores nothing
	unread, err := rc.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer unread.Close()
	held, err := rc.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	buf := make([]byte, 64<<10)
	if _, err := held.ReadAt(buf, 1<<20); err != nil || !bytes.Equal(buf, v1[1<<20:1<<20+len(buf)]) {
		t.Fatalf("held read: %v", err)
	}

	if _, err := c.HsmRestore(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	if err := writeSluice(ctx, c, "/f", v2); err != nil {
		t.Fatal(err)
	}
	// Archived again to the same key: the old copy is written over.
	archiveRelease()

	if _, err := unread.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, v2[:len(buf)]) {
		t.Fatalf("read through a descriptor that read nothing before: %v; want the new bytes", err)
	}
	if _, err := held.ReadAt(buf, 1<<20); err != nil || !bytes.Equal(buf, v1[1<<20:1<<20+len(buf)]) {
		t.Fatalf("read of what the held descriptor had fetched: %v; want those bytes", err)
	}
	if _, err := held.ReadAt(buf, 0); errs.CodeOf(err) != errs.Stale {
		t.Fatalf("read through a descriptor that read the old copy: %v; want stale", err)
	}
}
