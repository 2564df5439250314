// Package tier tests the object tier end to end (docs/tier.md): a real
// `sluice serve` holds the file system, and the backend is a real S3 server
// started by the test: a second `sluice serve --s3`, and versitygw (an
// independent S3 implementation, installed by .ci/run). The CLI and the
// client library drive archive, release and restore; the bucket is checked
// with a plain S3 client (minio-go). Every process is stopped by PID when
// its test ends, even on failure.
package tier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Main(m, &binary)) }

var readyLine = regexp.MustCompile(`serving on (\S+)`)

const (
	accessKey = "tier-test-key"
	secretKey = "tier-test-secret-0123456789" // must never appear in output
	bucket    = "archive"
)

// fsServer is the file system under test: a `sluice serve` process.
type fsServer struct {
	t       testing.TB
	dataDir string
	addr    string
	s3      string // its own S3 gateway (host:port), if started with one
	proc    *proctest.Proc
}

func startFS(t testing.TB, extra ...string) *fsServer {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--http", ""}, extra...)
	p, addr := proctest.Start(t, binary, nil, readyLine, args...)
	return &fsServer{t: t, dataDir: dir, addr: addr, proc: p}
}

type result struct {
	stdout, stderr string
	code           int
}

// cli runs `sluice ARGS...` against the file system.
func (s *fsServer) cli(args ...string) result {
	s.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+s.addr)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			s.t.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	if strings.Contains(r.stdout+r.stderr, secretKey) {
		s.t.Errorf("sluice %s printed the secret key", strings.Join(args, " "))
	}
	return r
}

func (s *fsServer) mustCLI(args ...string) string {
	s.t.Helper()
	r := s.cli(args...)
	if r.code != 0 {
		s.t.Fatalf("sluice %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// chunkBytes sums the sizes of the chunk files under the targets.
func (s *fsServer) chunkBytes() int64 {
	var n int64
	filepath.Walk(filepath.Join(s.dataDir, "targets"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// backend is a running S3 server used as the tier.
type backend struct {
	name     string
	endpoint string // http://host:port
	addr     string
	proc     *proctest.Proc
	restart  func() *proctest.Proc // starts it again on the same address and data
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitTCP waits until addr accepts connections (or the process exits).
func waitTCP(t testing.TB, p *proctest.Proc, addr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-p.Exited():
			t.Fatalf("backend exited: %s", p.Logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %s not listening after 60 s: %s", addr, p.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startSluiceBackend runs a second `sluice serve --s3` as the tier.
// backends starts each real S3 backend the tests run against in turn:
// another sluice's gateway, then versitygw.
var backends = []func(testing.TB) *backend{startSluiceBackend, startVersity}

// eachBackend runs f as a subtest against each of the backends.
func eachBackend(t *testing.T, f func(t *testing.T, be *backend)) {
	for _, start := range backends {
		be := start(t)
		t.Run(be.name, func(t *testing.T) { f(t, be) })
	}
}

func startSluiceBackend(t testing.TB) *backend {
	t.Helper()
	dir := t.TempDir()
	s3addr := freeAddr(t)
	run := func() *proctest.Proc {
		p, _ := proctest.Start(t, binary, nil, readyLine, "serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--http", "",
			"--s3", s3addr, "--s3-access-key", accessKey, "--s3-secret-key", secretKey)
		waitTCP(t, p, s3addr)
		return p
	}
	b := &backend{name: "sluice-s3", endpoint: "http://" + s3addr, addr: s3addr, proc: run()}
	b.restart = func() *proctest.Proc { b.proc = run(); return b.proc }
	b.makeBucket(t)
	return b
}

// startVersity runs versitygw v1.8.0 (posix backend) as the tier.
func startVersity(t testing.TB) *backend {
	t.Helper()
	gw := os.Getenv("VERSITYGW")
	if gw == "" {
		gw = "versitygw"
		if p, err := exec.LookPath(gw); err == nil {
			gw = p
		} else if home, _ := os.UserHomeDir(); home != "" {
			if _, err := os.Stat(filepath.Join(home, "go", "bin", "versitygw")); err == nil {
				gw = filepath.Join(home, "go", "bin", "versitygw")
			}
		}
	}
	gw = proctest.NeedTool(t, gw)
	root := t.TempDir()
	addr := freeAddr(t)
	run := func() *proctest.Proc {
		// versitygw prints no ready line: wait for its port.
		p, _ := proctest.Start(t, gw, nil, regexp.MustCompile(`(listening on)`), "--access", accessKey, "--secret", secretKey, "--port", addr, "posix", root)
		waitTCP(t, p, addr)
		return p
	}
	b := &backend{name: "versitygw", endpoint: "http://" + addr, addr: addr, proc: run()}
	b.restart = func() *proctest.Proc { b.proc = run(); return b.proc }
	b.makeBucket(t)
	return b
}

// s3 returns a plain S3 client of the backend (the test's view of the bucket).
func (b *backend) s3(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(b.addr, &minio.Options{Creds: credentials.NewStaticV4(accessKey, secretKey, ""), BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// putObject puts data under key in the test bucket through s3c, as
// another program would, failing the test on an error.
func putObject(t testing.TB, s3c *minio.Client, key string, data []byte) {
	t.Helper()
	if _, err := s3c.PutObject(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func (b *backend) makeBucket(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.s3(t).MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("%s: make bucket: %v", b.name, err)
	}
}

// addBackend registers b as tier backend "t" of fs, credentials through
// the environment.
func addBackend(t testing.TB, fs *fsServer, b *backend, prefix string) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", accessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secretKey)
	fs.mustCLI("tier", "add", "t", "--endpoint", b.endpoint, "--bucket", bucket, "--prefix", prefix, "--region", "us-east-1")
}

// randomData returns n bytes from a seeded generator (seed printed on failure).
func randomData(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// readAll reads p through c and returns its SHA-256.
func readSum(ctx context.Context, c *client.Client, p string) ([32]byte, int64, error) {
	f, err := c.Open(ctx, p)
	if err != nil {
		return [32]byte{}, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s, n, err
}

// newClient is a client whose reads of released files always go to the
// bucket (no restore on read): the tests of the read path itself use it.
func newClient(t testing.TB, addr string, tierTimeout time.Duration) *client.Client {
	t.Helper()
	return newClientOpts(t, client.Options{Server: addr, TierTimeout: tierTimeout, TierNoRestoreOnRead: true})
}

func newClientOpts(t testing.TB, opts client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func hexSum(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

func writeFile(name, s string) error { return os.WriteFile(name, []byte(s), 0o600) }

// writeSluice writes a file through the client library.
func writeSluice(ctx context.Context, c *client.Client, p string, d []byte) error {
	return proctest.WriteFile(ctx, c, p, d)
}

// writeTree writes n files of about 2 MiB (seeded from seed) under /tree
// and returns their contents by path.
func writeTree(t testing.TB, c *client.Client, n int, seed uint64) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	files := map[string][]byte{}
	if err := c.MkdirAll(ctx, "/tree", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p := fmt.Sprintf("/tree/f%02d", i)
		files[p] = randomData(seed+uint64(i), 2<<20+i*4096)
		if err := writeSluice(ctx, c, p, files[p]); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// checkObjects checks that each file's object (key: its path, backend
// prefix "") carries the SHA-256 of the file's bytes.
func checkObjects(t testing.TB, be *backend, files map[string][]byte) {
	t.Helper()
	s3c := be.s3(t)
	for p, d := range files {
		info, err := s3c.StatObject(context.Background(), bucket, strings.TrimPrefix(p, "/"), minio.StatObjectOptions{})
		if err != nil || info.Metadata.Get("X-Amz-Meta-Sluice-Sha256") != hex.EncodeToString(sha(d)) {
			t.Fatalf("object of %s: %v", p, err)
		}
	}
}

// waitFor polls cond until it holds; the long deadline only stops a test
// that would hang (it is no performance assertion).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after 2 minutes", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startCLI starts `sluice ARGS...` as a process and waits for a line of its
// output matching ready.
func startCLI(t testing.TB, fs *fsServer, ready string, args ...string) (*proctest.Proc, string) {
	t.Helper()
	return proctest.Start(t, binary, []string{"SLUICE_SERVER=" + fs.addr}, regexp.MustCompile(regexp.QuoteMeta(ready)), args...)
}

// newGatewayClient is a plain S3 client of the file system's own gateway.
func newGatewayClient(t testing.TB, fs *fsServer) *minio.Client {
	t.Helper()
	c, err := minio.New(fs.s3, &minio.Options{Creds: credentials.NewStaticV4(accessKey, secretKey, ""), BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// requireFUSE skips (fails under CI=true) a test that mounts, without
// root or /dev/fuse.
func requireFUSE(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		proctestSkip(t, "the mount test needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		proctestSkip(t, "the mount test needs /dev/fuse: %v", err)
	}
}

func proctestSkip(t testing.TB, format string, args ...any) {
	t.Helper()
	proctest.SkipMissing(t, format, args...)
}

// syncLog collects a process's output from its goroutines.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }
