package tier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestImport imports an existing bucket's objects (written by a plain S3
// client) as released files, against each real S3 backend: files appear
// with the objects' sizes, read back byte for byte and restore; an
// existing file is not replaced; removing, rewriting and archiving the
// files again never deletes or changes the imported objects; an object
// replaced in the bucket afterwards reads as corrupt, never as its new
// bytes.
// TestImport imports a bucket's objects from the listing alone (the
// default: each read pinned to the object's ETag, the first restore takes
// the block checksums) and with --checksums (every object read at
// import), from both backends.
func TestImport(t *testing.T) {
	for _, start := range backends {
		be := start(t)
		for _, checksums := range []bool{false, true} {
			name := be.name + "/listing"
			if checksums {
				name = be.name + "/checksums"
			}
			t.Run(name, func(t *testing.T) { testImport(t, be, checksums) })
		}
	}
}

func testImport(t *testing.T, be *backend, checksums bool) {
	ctx := context.Background()
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClientOpts(t, client.Options{Server: fs.addr}) // restores on read
	s3c := be.s3(t)
	// Each run its own bucket's keys: the backends are shared.
	pfx := fmt.Sprintf("ds-%v/", checksums)
	objects := map[string][]byte{
		pfx + "a.bin":     randomData(31, 3<<20+5),
		pfx + "sub/b.bin": randomData(32, 1<<20),
		pfx + "c.bin":     randomData(33, 200<<10),
		pfx + "empty":     {},
		pfx + "dir/":      {}, // a "folder" marker: skipped
		pfx + "exists":    randomData(34, 1000),
		"other/x":         randomData(35, 10), // outside the prefix
	}
	for k, d := range objects {
		putObject(t, s3c, k, d)
	}
	// An object uploaded in parts: its ETag is not an MD5 of its bytes.
	multi := randomData(39, 11<<20+7)
	objects[pfx+"multi.bin"] = multi
	if _, err := s3c.PutObject(ctx, bucket, pfx+"multi.bin", bytes.NewReader(multi), int64(len(multi)), minio.PutObjectOptions{PartSize: 5 << 20}); err != nil {
		t.Fatalf("put multi.bin: %v", err)
	}
	var flags []string
	if checksums {
		flags = []string{"--checksums"}
	}
	mine := randomData(36, 500)
	if err := c.MkdirAll(ctx, "/imp", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeSluice(ctx, c, "/imp/exists", mine); err != nil {
		t.Fatal(err)
	}

	r := fs.cli(append([]string{"tier", "import", "t/" + pfx, "/imp"}, flags...)...)
	t.Logf("tier import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code == 0 || !strings.Contains(r.stdout, "imported 4 files (") || !strings.Contains(r.stdout, "and 1 empty ones; 0 imported before, 1 keys skipped, 1 failed") {
		t.Fatalf("tier import: want 4 files, 1 empty, 1 skipped, 1 failed (the existing file) and a failure exit")
	}
	// A second run picks up only a new object.
	objects[pfx+"new.bin"] = randomData(38, 70000)
	if _, err := s3c.PutObject(ctx, bucket, pfx+"new.bin", bytes.NewReader(objects[pfx+"new.bin"]), 70000, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	r = fs.cli(append([]string{"tier", "import", "t", "/imp", "--prefix", pfx}, flags...)...)
	t.Logf("tier import again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if !strings.Contains(r.stdout, "imported 1 files (") || !strings.Contains(r.stdout, "and 0 empty ones; 5 imported before, 1 keys skipped, 1 failed") {
		t.Fatalf("tier import again: want 1 new file, 5 imported before, 1 skipped, 1 failed")
	}
	if got, err := readAll(ctx, c, "/imp/exists"); err != nil || !bytes.Equal(got, mine) {
		t.Fatalf("the existing file was changed by the import: %v", err)
	}
	if _, err := c.Stat(ctx, "/imp/x"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("a key outside the prefix was imported: %v", err)
	}
	for _, p := range []string{"/imp/a.bin", "/imp/sub/b.bin", "/imp/c.bin"} {
		info, err := c.HsmState(ctx, p)
		if err != nil || info.State != "released" {
			t.Fatalf("%s: state %+v, %v; want released", p, info, err)
		}
		fi, err := c.Stat(ctx, p)
		if err != nil || fi.Size() != int64(len(objects[strings.TrimSuffix(pfx, "/")+strings.TrimPrefix(p, "/imp")])) {
			t.Fatalf("%s: stat %v, %v", p, fi, err)
		}
	}
	if fi, err := c.Stat(ctx, "/imp/empty"); err != nil || fi.Size() != 0 {
		t.Fatalf("/imp/empty: %v, %v", fi, err)
	}
	if fs.chunkBytes() > 64<<10 {
		t.Fatalf("the import wrote %d bytes of chunks; it must copy nothing", fs.chunkBytes())
	}

	// Reads: byte for byte, and the first read restores.
	for p, k := range map[string]string{"/imp/a.bin": pfx + "a.bin", "/imp/sub/b.bin": pfx + "sub/b.bin", "/imp/new.bin": pfx + "new.bin", "/imp/multi.bin": pfx + "multi.bin"} {
		got, err := readAll(ctx, c, p)
		if err != nil || !bytes.Equal(got, objects[k]) {
			t.Fatalf("%s: read %d bytes (%v), want the object's %d", p, len(got), err, len(objects[k]))
		}
		waitFor(t, p+" restored", func() bool {
			info, err := c.HsmState(ctx, p)
			return err == nil && info.State == "archived"
		})
	}
	// A restored file released again (its chunks compared with the
	// block checksums its restore took, for a listing import) reads
	// back byte for byte.
	for p, k := range map[string]string{"/imp/multi.bin": pfx + "multi.bin", "/imp/new.bin": pfx + "new.bin"} {
		fs.mustCLI("hsm", "release", p)
		if info, err := c.HsmState(ctx, p); err != nil || info.State != "released" {
			t.Fatalf("%s: state %+v, %v after release; want released", p, info, err)
		}
		c2 := newClientOpts(t, client.Options{Server: fs.addr, TierNoRestoreOnRead: true})
		got, err := readAll(ctx, c2, p)
		if err != nil || !bytes.Equal(got, objects[k]) {
			t.Fatalf("%s released again: read %d bytes (%v), want the object's %d", p, len(got), err, len(objects[k]))
		}
	}
	// Rewrite b (dirty), archive it again (to its own key), remove a,
	// collect: the imported objects stay as they were.
	if err := writeSluice(ctx, c, "/imp/sub/b.bin", []byte("new")); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("hsm", "archive", "/imp/sub/b.bin")
	if err := c.Remove(ctx, "/imp/a.bin"); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("hsm", "remove", "/imp/sub/b.bin")
	fs.mustCLI("tier", "gc")
	for _, k := range []string{pfx + "a.bin", pfx + "sub/b.bin"} {
		obj, err := s3c.GetObject(ctx, bucket, k, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(obj)
		if err != nil || !bytes.Equal(got, objects[k]) {
			t.Fatalf("imported object %s was changed or deleted: %d bytes, %v", k, len(got), err)
		}
	}

	// An imported object replaced in the bucket (same size) reads as
	// corrupt through Sluice.
	other := randomData(37, len(objects[pfx+"c.bin"]))
	putObject(t, s3c, pfx+"c.bin", other)
	got, err := readAll(ctx, c, "/imp/c.bin")
	if errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("read of a replaced imported object: %d bytes, %v; want a corruption error", len(got), err)
	}
}

// TestImportKilled: `sluice tier import` killed with SIGKILL part-way,
// then run again, leaves every object imported once, byte for byte, and
// no failures; a batch is made whole or not at all, so the killed run
// leaves no temporary names (at most one per object in flight, were the
// files made one at a time).
func TestImportKilled(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	s3c := be.s3(t)
	const n, parallel = 6000, 8
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("kill/d%02d/o-%05d", i%30, i)
	}
	putObjects(t, s3c, keys)
	// Killed as soon as it reports its first file (a batch's worth).
	p, _ := startCLI(t, fs, "/kill/", "tier", "import", "t/kill/", "/kill", "-P", fmt.Sprint(parallel))
	select {
	case <-p.Exited():
		t.Fatalf("the import finished before it was killed:\n%s", p.Logs())
	default:
	}
	p.Kill()
	killed := strings.Count(p.Logs(), "stdout: /kill/")
	r := fs.cli("tier", "import", "t/kill/", "/kill", "-q")
	t.Logf("killed after %d files; again: exit %d\n%s%s", killed, r.code, r.stdout, r.stderr)
	var made, before int
	if _, err := fmt.Sscanf(r.stdout, "imported %d files", &made); err != nil || r.code != 0 {
		t.Fatalf("import again: exit %d, %q", r.code, r.stdout)
	}
	if _, err := fmt.Sscanf(r.stdout[strings.Index(r.stdout, "empty ones; ")+len("empty ones; "):], "%d imported before", &before); err != nil {
		t.Fatalf("import again: %q", r.stdout)
	}
	if made+before != n || before < killed || !strings.Contains(r.stdout, ", 0 failed") {
		t.Fatalf("import again: %d made + %d before, want %d in all (at least %d before) and no failures", made, before, n, killed)
	}
	c := newClientOpts(t, client.Options{Server: fs.addr, TierNoRestoreOnRead: true})
	files, temps := 0, 0
	for d := range 30 {
		for e, err := range c.ReadDir(ctx, fmt.Sprintf("/kill/d%02d", d)) {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(e.Name, ".sluice-import-") {
				temps++
				continue
			}
			files++
		}
	}
	if files != n || temps > parallel {
		t.Fatalf("%d files and %d temporary names after the second run; want %d files and at most %d temporaries", files, temps, n, parallel)
	}
	t.Logf("%d temporary names left by the killed run", temps)
	for i := 0; i < n; i += 97 {
		p := "/" + keys[i]
		if got, err := readAll(ctx, c, p); err != nil || !bytes.Equal(got, objectData(keys[i])) {
			t.Fatalf("%s: read %q, %v", p, got, err)
		}
	}
}

// TestImportOlderService: against a metadata service without OpTierImport
// (a proxy on loopback answers it "not supported", as an older service
// does), an import from the listing makes every file one at a time
// instead, with the same result.
func TestImportOlderService(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	s3c := be.s3(t)
	const n, parallel = 600, 4
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("old/d%d/o-%04d", i%3, i)
	}
	putObjects(t, s3c, keys)
	old := proctest.StartOlderService(t, fs.addr, wire.OpTierImport)
	c := newClientOpts(t, client.Options{Server: old.Addr, TierNoRestoreOnRead: true})
	st, err := c.TierImport(ctx, "t", "old/", "/old", parallel, nil)
	if err != nil || st.Files != n || st.Failed != 0 {
		t.Fatalf("import against the older service: %+v, %v", st, err)
	}
	if r := old.Refused(wire.OpTierImport); r < 1 || r > parallel {
		t.Fatalf("the older service refused %d batch requests; want 1 to %d (the batches in flight before the first answer)", r, parallel)
	}
	for i := 0; i < n; i += 37 {
		p := "/" + keys[i]
		if got, err := readAll(ctx, c, p); err != nil || !bytes.Equal(got, objectData(keys[i])) {
			t.Fatalf("%s: read %q, %v", p, got, err)
		}
	}
	st, err = c.TierImport(ctx, "t", "old/", "/old", parallel, nil)
	if err != nil || st.Present != n || st.Files != 0 {
		t.Fatalf("import again: %+v, %v; want every object imported before", st, err)
	}
	// A dry run against a service without OpTierImportDry tells the
	// files apart by its walk of the directory: every object whose key
	// a file has counts as imported before, a new one as new.
	putObject(t, s3c, "old/d9/new", []byte("new object"))
	dry := proctest.StartOlderService(t, fs.addr, wire.OpTierImportDry)
	cd := newClientOpts(t, client.Options{Server: dry.Addr})
	st, err = cd.TierImportWith(ctx, "t", "old/", "/old", client.ImportOptions{Parallel: parallel, DryRun: true})
	if err != nil || st.Present != n || st.Files != 1 || dry.Refused(wire.OpTierImportDry) < 1 {
		t.Fatalf("dry run against a service without OpTierImportDry: %+v, %v (refused %d)", st, err, dry.Refused(wire.OpTierImportDry))
	}
	if _, err := c.Stat(ctx, "/old/d9"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("/old/d9 after the dry run: %v; want nothing made", err)
	}
}

// objectData is the content putObjects gives the object of key k.
func objectData(k string) []byte { return []byte("object " + k) }

// putObjects puts an object of objectData(k) for each key, 16 at once.
func putObjects(t *testing.T, s3c *minio.Client, keys []string) {
	t.Helper()
	ctx := context.Background()
	if err := parallelEach(keys, 16, func(k string) error {
		d := objectData(k)
		_, err := s3c.PutObject(ctx, bucket, k, bytes.NewReader(d), int64(len(d)), minio.PutObjectOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
