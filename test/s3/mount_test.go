package s3

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestMountInterop runs `sluice serve --s3 --mount`: an object written
// over S3 is a file on the FUSE mount and a file written on the mount is
// an object.
func TestMountInterop(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		proctest.SkipMissing(t, "no FUSE on this machine: %v", err)
	}
	mp := t.TempDir()
	dataDir := t.TempDir()
	p, _ := startProc(t, nil, regexp.MustCompile(`mounted on (\S+)`), "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0",
		"--s3", "127.0.0.1:0", "--s3-access-key", testAK, "--s3-secret-key", testSK, "--mount", mp)
	t.Cleanup(func() {
		p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Exited():
		case <-time.After(20 * time.Second):
		}
		exec.Command("fusermount3", "-u", "-z", mp).Run()
	})
	m := gatewayLine.FindStringSubmatch(p.Logs())
	if m == nil {
		t.Fatalf("no gateway line: %s", p.Logs())
	}
	c := newS3Client(m[1])
	resp, body := c.do(t, "PUT", "/mnt", nil, nil, nil)
	mustStatus(t, resp, body, 200)
	data := bytes.Repeat([]byte("via s3 "), 50000)
	resp, body = c.do(t, "PUT", "/mnt/dir/obj", nil, http.Header{"X-Amz-Meta-A": {"b"}}, data)
	mustStatus(t, resp, body, 200)
	got, err := os.ReadFile(filepath.Join(mp, "mnt", "dir", "obj"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read on the mount: %d bytes, %v", len(got), err)
	}
	posix := bytes.Repeat([]byte("via posix "), 50000)
	if err := os.WriteFile(filepath.Join(mp, "mnt", "dir", "posix.bin"), posix, 0o644); err != nil {
		t.Fatal(err)
	}
	resp, got = c.do(t, "GET", "/mnt/dir/posix.bin", nil, nil, nil)
	if resp.StatusCode != 200 || !bytes.Equal(got, posix) {
		t.Fatalf("GET of a file written on the mount: %d, %d bytes", resp.StatusCode, len(got))
	}
	if keys := c.list(t, "mnt", nil).keys(); len(keys) != 2 || keys[0] != "dir/obj" || keys[1] != "dir/posix.bin" {
		t.Errorf("listing: %q", keys)
	}
}
