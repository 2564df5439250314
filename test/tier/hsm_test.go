package tier

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-fs/sluice/internal/errs"
)

// TestTierBackends: `tier add` reports an unreachable backend, refused
// credentials and a missing bucket, registers a good one, and neither
// `tier ls` nor `status` prints the secret (cli checks every output).
func TestTierBackends(t *testing.T) {
	fs := startFS(t)
	be := startSluiceBackend(t)
	dead := freeAddr(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--endpoint", "http://" + dead, "--bucket", bucket, "--access-key", accessKey, "--secret-key", secretKey}, "unreachable"},
		{[]string{"--endpoint", be.endpoint, "--bucket", bucket, "--access-key", accessKey, "--secret-key", "wrong-secret-key"}, "credentials refused"},
		{[]string{"--endpoint", be.endpoint, "--bucket", "no-such-bucket", "--access-key", accessKey, "--secret-key", secretKey}, "does not exist"},
		{[]string{"--endpoint", "ftp://x", "--bucket", bucket}, "not an http(s)"},
	} {
		r := fs.cli(append([]string{"tier", "add", "x"}, tt.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("tier add %v: exit %d, %q; want an error with %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	if out := fs.mustCLI("tier", "ls"); strings.Count(out, "\n") != 1 {
		t.Fatalf("failed adds registered something: %q", out)
	}
	// Credentials from a file.
	cred := t.TempDir() + "/creds"
	if err := writeFile(cred, "[default]\naws_access_key_id = "+accessKey+"\naws_secret_access_key = "+secretKey+"\n"); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("tier", "add", "t", "--endpoint", be.endpoint, "--bucket", bucket, "--credentials", cred)
	if r := fs.cli("tier", "add", "t", "--endpoint", be.endpoint, "--bucket", bucket, "--credentials", cred); r.code == 0 || !strings.Contains(r.stderr, "exists") {
		t.Errorf("second add: %d %q", r.code, r.stderr)
	}
	out := fs.mustCLI("tier", "ls", "--check")
	if !strings.Contains(out, be.endpoint) || !strings.Contains(out, " ok") {
		t.Errorf("tier ls --check: %q", out)
	}
	if out := fs.mustCLI("status"); !strings.Contains(out, "TIER BACKEND") || !strings.Contains(out, " ok") {
		t.Errorf("status: %q", out)
	}
	// A backend that went away shows in status, which still answers.
	be.proc.Kill()
	if out := fs.mustCLI("status"); !strings.Contains(out, "FAILED") || !strings.Contains(out, "unreachable") {
		t.Errorf("status with the backend down: %q", out)
	}
	fs.mustCLI("tier", "rm", "t")
	if out := fs.mustCLI("tier", "ls"); strings.Contains(out, be.endpoint) {
		t.Errorf("tier ls after rm: %q", out)
	}
	if strings.Contains(fs.proc.Logs(), secretKey) {
		t.Error("the server logged the secret key")
	}
}

// TestHSM runs archive → release → read → restore over each backend.
func TestHSM(t *testing.T) {
	for i, start := range backends {
		be := start(t)
		t.Run(be.name, func(t *testing.T) { testHSM(t, be, i == 0) })
	}
}

// testHSM runs the round trip over be; with big, one file is over 64 MiB
// (archived in two passes: checksums, then a multipart upload).
func testHSM(t *testing.T, be *backend, big bool) {
	ctx := context.Background()
	gwAddr := freeAddr(t)
	fs := startFS(t, "--s3", gwAddr, "--s3-access-key", accessKey, "--s3-secret-key", secretKey)
	fs.s3 = gwAddr
	addBackend(t, fs, be, "fs1/")
	c := newClient(t, fs.addr, 0)
	files := map[string][]byte{
		"/data/a":       randomData(1, 3<<20+17),
		"/data/sub/b":   randomData(2, 1<<20),
		"/data/sub/c":   randomData(3, 9<<20+4095),
		"/data/small":   randomData(4, 100), // inline in the metadata: archived, never released
		"/data/big.bin": randomData(5, 20<<20),
	}
	if big {
		files["/data/big.bin"] = randomData(5, 70<<20)
	}
	if err := c.MkdirAll(ctx, "/data/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	for p, d := range files {
		if err := writeSluice(ctx, c, p, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetXattr(ctx, "/data/a", "user.k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	before, err := c.Stat(ctx, "/data/a")
	if err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("hsm", "archive", "-r", "/data")
	out := fs.mustCLI("hsm", "state", "-r", "/data")
	if strings.Count(out, "archived\t") != len(files) {
		t.Fatalf("after archive: %q", out)
	}
	// Each object is readable with a plain S3 client, its key derived from
	// the path, its SHA-256 in its metadata.
	s3c := be.s3(t)
	for p, d := range files {
		obj, err := s3c.GetObject(ctx, bucket, "fs1"+p, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(obj)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		st, _ := obj.Stat()
		if hexSum(got) != hexSum(d) || st.Metadata.Get("X-Amz-Meta-Sluice-Sha256") != hexSum(d) {
			t.Fatalf("object of %s: %d bytes, sha256 meta %q; want %d bytes %s", p, len(got), st.Metadata.Get("X-Amz-Meta-Sluice-Sha256"), len(d), hexSum(d))
		}
	}
	used := fs.chunkBytes()
	out = fs.mustCLI("hsm", "release", "-r", "/data")
	if strings.Count(out, "released\t") != len(files)-1 || !strings.Contains(out, "nothing to release") {
		t.Fatalf("release: %q", out)
	}
	// The target space comes back with the collector's next pass.
	waitFor(t, "chunks of released files removed", func() bool { return fs.chunkBytes() < used/100 })
	// Attributes stay, and stat never asks the backend: stop it.
	be.proc.Pause(t)
	after, err := c.Stat(ctx, "/data/a")
	if err != nil || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || after.Mode() != before.Mode() {
		t.Fatalf("stat of released: %v %v; before %v", after, err, before)
	}
	if v, err := c.GetXattr(ctx, "/data/a", "user.k"); err != nil || string(v) != "v" {
		t.Fatalf("xattr of released: %q %v", v, err)
	}
	fs.mustCLI("ls", "-l", "/data")
	be.proc.Resume()
	// Reads fetch from the tier, byte-exact: library, and the file
	// system's own S3 gateway.
	for p, d := range files {
		sum, n, err := readSum(ctx, c, p)
		if err != nil || n != int64(len(d)) || sum != sha256.Sum256(d) {
			t.Fatalf("read of released %s: %d bytes, %v; sum %x want %s", p, n, err, sum, hexSum(d))
		}
	}
	gw := newGatewayClient(t, fs)
	if err := gw.MakeBucket(ctx, "data", minio.MakeBucketOptions{}); err == nil {
		t.Fatal("the gateway made a bucket that exists as a directory")
	}
	obj, err := gw.GetObject(ctx, "data", "sub/c", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	if err != nil || hexSum(got) != hexSum(files["/data/sub/c"]) {
		t.Fatalf("gateway GET of released: %d bytes, %v", len(got), err)
	}
	fs.mustCLI("hsm", "restore", "/data/a", "/data/sub/c")
	out = fs.mustCLI("hsm", "state", "/data/a", "/data/sub/c", "/data/sub/b")
	if !strings.Contains(out, "archived\t/data/a") || !strings.Contains(out, "archived\t/data/sub/c") || !strings.Contains(out, "released\t/data/sub/b") {
		t.Fatalf("after restore: %q", out)
	}
	if fs.chunkBytes() < int64(len(files["/data/a"])+len(files["/data/sub/c"])) {
		t.Fatalf("restored files are not on the targets: %d chunk bytes", fs.chunkBytes())
	}
	// The metadata service counts the restores; sluice status shows them.
	rt, err := c.RestoreTotals(ctx)
	if want := uint64(len(files["/data/a"]) + len(files["/data/sub/c"])); err != nil || rt.Restored < 2 || rt.Leases < rt.Restored || rt.RestoredBytes < want {
		t.Fatalf("restore totals after restoring two files (%d bytes): %+v, %v", want, rt, err)
	}
	status := fs.mustCLI("status")
	m := regexp.MustCompile(`TIER RESTORES.*\nsince the metadata service started\s+(\d+)\s+\d+\s+(\d+)\s`).FindStringSubmatch(status)
	if m == nil || m[1] != strconv.FormatUint(rt.Leases, 10) || m[2] != strconv.FormatUint(rt.Restored, 10) {
		t.Fatalf("status does not show the restore totals %+v: %q", rt, status)
	}
	be.proc.Pause(t) // restored files are read from the targets
	for _, p := range []string{"/data/a", "/data/sub/c"} {
		if sum, _, err := readSum(ctx, c, p); err != nil || sum != sha256.Sum256(files[p]) {
			t.Fatalf("read of restored %s: %v", p, err)
		}
	}
	be.proc.Resume()
	f, err := c.OpenFile(ctx, "/data/a", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 5); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if out := fs.mustCLI("hsm", "state", "/data/a"); !strings.HasPrefix(out, "dirty\t") {
		t.Fatalf("after a write: %q", out)
	}
	if r := fs.cli("hsm", "release", "/data/a"); r.code == 0 || !strings.Contains(r.stderr, "changed since it was archived") {
		t.Fatalf("release of dirty: %d %q", r.code, r.stderr)
	}
	// Removing files queues their objects; tier gc deletes them.
	fs.mustCLI("rm", "-r", "/data/sub")
	if r := fs.cli("hsm", "remove", "/data/big.bin"); r.code == 0 || !strings.Contains(r.stderr, "restore it") {
		t.Fatalf("hsm remove of released: %d %q", r.code, r.stderr)
	}
	out = fs.mustCLI("tier", "gc")
	if !strings.HasPrefix(out, "2 objects deleted") {
		t.Fatalf("tier gc: %q", out)
	}
	for _, k := range []string{"fs1/data/sub/b", "fs1/data/sub/c"} {
		if _, err := s3c.StatObject(ctx, bucket, k, minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != minio.NoSuchKey {
			t.Errorf("object %s after gc: %v", k, err)
		}
	}
	if _, err := s3c.StatObject(ctx, bucket, "fs1/data/big.bin", minio.StatObjectOptions{}); err != nil {
		t.Errorf("gc removed a live file's object: %v", err)
	}
}

// TestBackendDown: reads of a released file whose backend stops answering
// fail with EIO (errs.Unavailable) once the tier timeout passes, never
// with wrong bytes, and succeed once it is back; the same when the backend
// is killed mid-read and restarted.
func TestBackendDown(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClient(t, fs.addr, 0)
	data := randomData(7, 12<<20)
	if err := writeSluice(ctx, c, "/f", data); err != nil {
		t.Fatal(err)
	}
	fs.mustCLI("hsm", "archive", "/f")
	fs.mustCLI("hsm", "release", "/f")
	slow := newClient(t, fs.addr, 2*time.Second)

	be.proc.Pause(t)
	_, _, err := readSum(ctx, slow, "/f")
	if errs.CodeOf(err) != errs.Unavailable || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("read with the backend stopped: %v; want unavailable (EIO)", err)
	}
	be.proc.Resume()
	if sum, _, err := readSum(ctx, slow, "/f"); err != nil || sum != sha256.Sum256(data) {
		t.Fatalf("read after the backend came back: %v", err)
	}

	// Killed in the middle of a read: the reader gets an error or the
	// right bytes, never others; after a restart the read succeeds.
	f, err := slow.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	if _, err := io.ReadFull(f, buf); err != nil || hexSum(buf) != hexSum(data[:1<<20]) {
		t.Fatalf("first MiB: %v", err)
	}
	be.proc.Kill()
	rest, err := io.ReadAll(f)
	f.Close()
	if err == nil && hexSum(rest) != hexSum(data[1<<20:]) {
		t.Fatal("read across the backend's death returned wrong bytes")
	}
	if err != nil && errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("read across the backend's death: %v; want unavailable", err)
	}
	if r := fs.cli("hsm", "restore", "/f"); r.code == 0 {
		t.Fatal("restore with the backend dead succeeded")
	}
	if out := fs.mustCLI("hsm", "state", "/f"); !strings.HasPrefix(out, "released\t") {
		t.Fatalf("state after a failed restore: %q", out)
	}
	be.restart()
	if sum, _, err := readSum(ctx, slow, "/f"); err != nil || sum != sha256.Sum256(data) {
		t.Fatalf("read after the restart: %v", err)
	}
	fs.mustCLI("hsm", "restore", "/f")
	if sum, _, err := readSum(ctx, c, "/f"); err != nil || sum != sha256.Sum256(data) {
		t.Fatalf("read after restore: %v", err)
	}
}

// TestKillMidway kills (-9) the CLI process during an archive and during a
// restore of a tree: afterwards every file is in a consistent state, reads
// byte-exact, and running the command again finishes the job.
func TestKillMidway(t *testing.T) {
	ctx := context.Background()
	be := startSluiceBackend(t)
	fs := startFS(t)
	addBackend(t, fs, be, "")
	c := newClient(t, fs.addr, 0)
	files := writeTree(t, c, 24, 100)
	check := func(stage string, allowed ...string) map[string]int {
		t.Helper()
		states := map[string]int{}
		out := fs.mustCLI("hsm", "state", "-r", "/tree")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			st, _, _ := strings.Cut(line, "\t")
			states[st]++
			ok := false
			for _, a := range allowed {
				ok = ok || st == a
			}
			if !ok {
				t.Errorf("%s: %q", stage, line)
			}
		}
		for p, d := range files {
			if sum, _, err := readSum(ctx, c, p); err != nil || sum != sha256.Sum256(d) {
				t.Fatalf("%s: read %s: %v", stage, p, err)
			}
		}
		return states
	}
	killDuring(t, fs, "archived\t", "hsm", "archive", "-r", "/tree")
	st := check("after kill -9 during archive", "resident", "archived")
	t.Logf("states after the kill during archive: %v", st)
	fs.mustCLI("hsm", "archive", "-r", "/tree")
	check("after the archive again", "archived")
	// Every archived object matches its file.
	checkObjects(t, be, files)
	used := fs.chunkBytes()
	fs.mustCLI("hsm", "release", "-r", "/tree")
	waitFor(t, "release's chunk removal", func() bool { return fs.chunkBytes() < used/100 })
	killDuring(t, fs, "archived\t", "hsm", "restore", "-r", "/tree")
	st = check("after kill -9 during restore", "released", "archived")
	t.Logf("states after the kill during restore: %v", st)
	fs.mustCLI("hsm", "restore", "-r", "/tree")
	check("after the restore again", "archived")
}

// killDuring starts the CLI and kills it with SIGKILL once its output
// shows the first file done (so that it dies part-way).
func killDuring(t *testing.T, fs *fsServer, first string, args ...string) {
	t.Helper()
	p, _ := startCLI(t, fs, first, args...)
	p.Kill()
}

func sha(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
