package tier

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/tcpproxy"
)

// TestReleaseUncommittedWrite: a client's written bytes reach the targets
// before its size commit reaches the metadata service. A release (and a
// restore) in that window must not drop them (ADR 0023): the release reads
// the frozen chunks, finds bytes that are not the copy's, and is refused;
// the writer's commit then lands, and its bytes are the file's. The
// writer's link to the metadata service goes through a proxy held still
// for the window; its link to the targets is direct.
func TestReleaseUncommittedWrite(t *testing.T) {
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "unc/")
	ctx := context.Background()
	c := restoringClient(t, fs.addr, 0)
	if err := c.MkdirAll(ctx, "/u", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		off  int64 // of the writer's bytes, in a file of 3 MiB
	}{
		{"overwrite", 1 << 20},
		{"append", 3 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := "/u/" + tc.name
			data := randomData(11, 3<<20)
			if err := writeSluice(ctx, c, p, data); err != nil {
				t.Fatal(err)
			}
			if _, err := c.HsmArchive(ctx, p, ""); err != nil {
				t.Fatal(err)
			}
			px := tcpproxy.Start(t, fs.addr)
			w := newClientOpts(t, client.Options{Server: px.Addr})
			f, err := w.OpenFile(ctx, p, client.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			patch := randomData(12, 100<<10)
			if _, err := f.WriteAt(patch, tc.off); err != nil {
				t.Fatal(err)
			}
			before := fs.chunkBytes()
			px.Pause()
			synced := make(chan error, 1)
			go func() { synced <- f.Sync() }()
			// The bytes are on the targets once a reader sees them (an
			// overwrite) or the chunk files grew (an append).
			waitFor(t, "the writer's bytes on the targets", func() bool {
				if tc.off+int64(len(patch)) > int64(len(data)) {
					return fs.chunkBytes() >= before+int64(len(patch))
				}
				got, err := readAllSluice(ctx, newClient(t, fs.addr, 0), p)
				return err == nil && bytes.Equal(got[tc.off:tc.off+int64(len(patch))], patch)
			})
			_, err = c.HsmRelease(ctx, p)
			if errs.CodeOf(err) != errs.Busy {
				t.Errorf("release with a write on the targets not committed: %v; want it refused (busy)", err)
			}
			// Whatever the release did, a restore now would write the
			// copy's bytes back (the old hole: the commit then succeeded
			// over them).
			if _, err := c.HsmRestore(ctx, p); err != nil {
				t.Fatal(err)
			}
			px.Resume()
			if err := <-synced; err != nil {
				t.Fatalf("the writer's sync: %v", err)
			}
			want := bytes.Clone(data)
			if end := tc.off + int64(len(patch)); end > int64(len(want)) {
				want = append(want, make([]byte, end-int64(len(want)))...)
			}
			copy(want[tc.off:], patch)
			got, err := readAllSluice(ctx, newClient(t, fs.addr, 0), p)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("after the commit: %d bytes, %v; want %d with the writer's bytes (first difference at %d)", len(got), err, len(want), firstDiff(got, want))
			}
			if info, err := c.HsmState(ctx, p); err != nil || info.State != "dirty" {
				t.Fatalf("state after the writer's commit: %+v, %v; want dirty", info, err)
			}
		})
	}
}

// TestReleaseUnderWriter: a client holds an archived file open while
// another releases it and a third reads it; the holder's later write
// (through a layout whose chunks are frozen and then removed) restores
// the file and lands, it is dirty, and every client reads the new bytes.
func TestReleaseUnderWriter(t *testing.T) { testReleaseUnderWriter(t, false) }

// TestReleaseUnderWriterFencesGone is TestReleaseUnderWriter where the
// holder and the reader act only after the targets dropped the removed
// chunks' fences (--chunk-fence-grace 1s): their layout leases (200 ms)
// ran out meanwhile, so they ask for the layout, find the file released
// and read it from the bucket or restore it before writing, instead of
// reading holes or writing chunks nobody reads (ADR 0023, addendum).
func TestReleaseUnderWriterFencesGone(t *testing.T) { testReleaseUnderWriter(t, true) }

func testReleaseUnderWriter(t *testing.T, fencesGone bool) {
	be := startSluiceBackend(t)
	var fs *fsServer
	lease := time.Duration(0) // the default
	if fencesGone {
		fs = startFS(t, "--chunk-fence-grace", "1s")
		lease = 200 * time.Millisecond
	} else {
		fs = startFS(t)
	}
	addBackend(t, fs, be, "under/")
	ctx := context.Background()
	c := restoringClient(t, fs.addr, 0)
	data := randomData(21, 5<<20+77)
	if err := writeSluice(ctx, c, "/f", data); err != nil {
		t.Fatal(err)
	}
	arch, err := c.HsmArchive(ctx, "/f", "")
	if err != nil {
		t.Fatal(err)
	}
	holder := newClientOpts(t, client.Options{Server: fs.addr, LayoutLease: lease})
	f, err := holder.OpenFile(ctx, "/f", client.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reader := newClientOpts(t, client.Options{Server: fs.addr, TierNoRestoreOnRead: true, LayoutLease: lease})
	r, err := reader.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := c.HsmRelease(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	// The release's chunk removal is done: the holder's and the reader's
	// layouts name chunks that are gone (and fenced).
	waitFor(t, "the released chunks removed", func() bool { return fs.chunkBytes() < int64(len(data)) })
	if fencesGone {
		waitFor(t, "the removed chunks' fences gone", func() bool {
			m, err := filepath.Glob(filepath.Join(fs.dataDir, "targets", "*", "fences", "*"))
			return err == nil && len(m) == 0
		})
	}
	got, err := io.ReadAll(io.NewSectionReader(r, 0, int64(len(data))))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reader opened before the release: %d bytes, %v; want the file's %d", len(got), err, len(data))
	}
	patch := randomData(22, 300<<10)
	if _, err := f.WriteAt(patch, 2<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("holder's write after the release: %v", err)
	}
	want := bytes.Clone(data)
	copy(want[2<<20:], patch)
	for name, cl := range map[string]*client.Client{"writer": c, "fresh": newClient(t, fs.addr, 0)} {
		got, err := readAllSluice(ctx, cl, "/f")
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s client reads %d bytes, %v; want the holder's write in the file (first difference at %d)", name, len(got), err, firstDiff(got, want))
		}
	}
	if info, err := c.HsmState(ctx, "/f"); err != nil || info.State != "dirty" {
		t.Fatalf("state after the holder's write: %+v, %v; want dirty", info, err)
	}
	// The bucket's copy is still the archive's.
	obj, err := be.s3(t).GetObject(ctx, bucket, "under/"+arch.Key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	if b, err := io.ReadAll(obj); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("the copy: %d bytes, %v; want the archived %d", len(b), err, len(data))
	}
}
