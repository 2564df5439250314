package s3

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGatewayCommand runs `sluice gateway --server` beside a plain
// `sluice serve`, with credentials from a file, and checks both ways of
// the namespace: S3 to the client library and back.
func TestGatewayCommand(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	srv, addr := startProc(t, nil, readyLine, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0")
	creds := filepath.Join(t.TempDir(), "creds")
	os.WriteFile(creds, []byte("# test\n"+testAK+" "+testSK+"\nSECONDKEY0001 second-secret-0001\n"), 0o600)
	gw, endpoint := startProc(t, nil, gatewayLine, "gateway", "--server", addr, "--listen", "127.0.0.1:0", "--s3-credentials", creds)
	g := &gateway{t: t, dataDir: dataDir, addr: addr, endpoint: endpoint, procs: []*proc{srv, gw}}
	c := newS3Client(endpoint)
	resp, body := c.do(t, "PUT", "/gwcmd", nil, nil, nil)
	mustStatus(t, resp, body, 200)
	second := *c
	second.ak, second.sk = "SECONDKEY0001", "second-secret-0001"
	resp, body = second.do(t, "PUT", "/gwcmd/from-s3", nil, http.Header{"Content-Type": {"text/s3"}}, []byte("written over S3"))
	mustStatus(t, resp, body, 200)

	fc := g.client()
	ctx := context.Background()
	if got := readAll(t, fc, "/gwcmd/from-s3"); string(got) != "written over S3" {
		t.Errorf("client library read %q", got)
	}
	if err := fc.MkdirAll(ctx, "/gwcmd/posix/dir", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fc.Create(ctx, "/gwcmd/posix/dir/file")
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("posix "), 100000)
	f.Write(data)
	f.Close()
	resp, got := c.do(t, "GET", "/gwcmd/posix/dir/file", nil, nil, nil)
	if resp.StatusCode != 200 || !bytes.Equal(got, data) {
		t.Fatalf("GET of a POSIX file: %d, %d bytes", resp.StatusCode, len(got))
	}
	// A POSIX file has no MD5 on record: its ETag says so (it is not 32
	// hex digits alone, so clients do not take it for an MD5).
	if etag := resp.Header.Get("ETag"); !regexp.MustCompile(`^"[0-9a-f]{32}-1"$`).MatchString(etag) {
		t.Errorf("ETag of a POSIX file: %s", etag)
	}
	// Overwriting an S3 object through POSIX invalidates its MD5 ETag.
	resp, _ = c.do(t, "HEAD", "/gwcmd/from-s3", nil, nil, nil)
	before := resp.Header.Get("ETag")
	f, err = fc.OpenFile(ctx, "/gwcmd/from-s3", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("W"), 0)
	f.Close()
	resp, got = c.do(t, "GET", "/gwcmd/from-s3", nil, nil, nil)
	if string(got) != "Written over S3" || resp.Header.Get("ETag") == before || resp.Header.Get("Content-Type") != "text/s3" {
		t.Errorf("after a POSIX write: %q, ETag %s (was %s), %v", got, resp.Header.Get("ETag"), before, resp.Header)
	}
	r := c.list(t, "gwcmd", nil)
	if strings.Join(r.keys(), ",") != "from-s3,posix/dir/file" {
		t.Errorf("listing: %q", r.keys())
	}
	g.alive()

	// The gateway refuses to start without credentials, and with a file
	// others can read.
	r1 := runTool(t, cleanEnv(), nil, binary, "gateway", "--server", addr, "--listen", "127.0.0.1:0")
	if r1.code == 0 || !strings.Contains(r1.stderr, "no credentials") {
		t.Errorf("gateway without credentials: %d %s", r1.code, r1.stderr)
	}
	os.Chmod(creds, 0o644)
	r1 = runTool(t, cleanEnv(), nil, binary, "gateway", "--server", addr, "--listen", "127.0.0.1:0", "--s3-credentials", creds)
	if r1.code == 0 || !strings.Contains(r1.stderr, "readable by others") {
		t.Errorf("gateway with a world-readable credentials file: %d %s", r1.code, r1.stderr)
	}
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_S3_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestGeneratedCredentials: a first `sluice serve --s3` without
// credentials generates a key pair in the data dir, says where, and a
// restart uses the same keys; the environment variables override it.
func TestGeneratedCredentials(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	p, _ := startProc(t, cleanEnv(), gatewayLine, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--s3", "127.0.0.1:0")
	credFile := filepath.Join(dataDir, "s3-credentials")
	if !strings.Contains(p.Logs(), "generated S3 credentials in "+credFile) {
		t.Errorf("serve did not say where the credentials are: %s", p.Logs())
	}
	fi, err := os.Stat(credFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", fi, err)
	}
	b, _ := os.ReadFile(credFile)
	var ak, sk string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && !strings.HasPrefix(l, "#") {
			ak, sk = f[0], f[1]
		}
	}
	p.Kill()
	p, endpoint := startProc(t, cleanEnv(), gatewayLine, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--s3", "127.0.0.1:0")
	if !strings.Contains(p.Logs(), "S3 credentials from "+credFile) {
		t.Errorf("restart did not reuse the file: %s", p.Logs())
	}
	c := newS3Client(endpoint)
	c.ak, c.sk = ak, sk
	resp, body := c.do(t, "GET", "/", nil, nil, nil)
	mustStatus(t, resp, body, 200)
	p.Kill()
	env := append(cleanEnv(), "SLUICE_S3_ACCESS_KEY=ENVKEY0001", "SLUICE_S3_SECRET_KEY=env-secret-0001")
	p, endpoint = startProc(t, env, gatewayLine, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--s3", "127.0.0.1:0")
	if !strings.Contains(p.Logs(), "S3 credentials from environment") {
		t.Errorf("restart with keys in the environment did not take them: %s", p.Logs())
	}
	c = newS3Client(endpoint)
	c.ak, c.sk = "ENVKEY0001", "env-secret-0001"
	resp, body = c.do(t, "GET", "/", nil, nil, nil)
	mustStatus(t, resp, body, 200)
	c.ak, c.sk = ak, sk
	resp, body = c.do(t, "GET", "/", nil, nil, nil)
	expectError(t, resp, body, 403, "InvalidAccessKeyId")
}
