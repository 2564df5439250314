package s3

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestKilledPutCollected kills `sluice serve --s3` with SIGKILL in the
// middle of a PUT and checks that the restarted gateway removes the
// partial body it left in .sluice-s3/tmp (issue 19: it stayed forever),
// and that the object never became visible.
func TestKilledPutCollected(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	c := newS3Client(g.endpoint)
	resp, body := c.do(t, "PUT", "/tmpgc", nil, nil, nil)
	mustStatus(t, resp, body, 200)
	resp, body = c.do(t, "PUT", "/tmpgc/kept", nil, nil, []byte("kept"))
	mustStatus(t, resp, body, 200)

	// A PUT announcing 64 MiB that sends 8 MiB and then waits.
	u, _ := url.Parse(g.endpoint)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write(signedRaw(c, "PUT", "/tmpgc/partial", nil, 64<<20, "UNSIGNED-PAYLOAD", nil))
	conn.Write(bytes.Repeat([]byte("p"), 8<<20))
	fc := g.client()
	ctx := context.Background()
	tmpDir := "/tmpgc/.sluice-s3/tmp"
	deadline := time.Now().Add(30 * time.Second)
	for {
		ents, err := fc.ReadDirAll(ctx, tmpDir)
		if err == nil && len(ents) == 1 {
			if fi, err := fc.Lstat(ctx, tmpDir+"/"+ents[0].Name); err == nil && fi.Size() > 0 {
				t.Logf("partial upload: %s, %d bytes", ents[0].Name, fi.Size())
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no partial upload in %s: %v %v", tmpDir, ents, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.procs[0].Kill()

	p := g.start()
	endpoint := g.endpoint
	fc2 := proctest.Client(t, g.addr)
	deadline = time.Now().Add(30 * time.Second)
	for {
		ents, err := fc2.ReadDirAll(ctx, tmpDir)
		if err == nil && len(ents) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted gateway left %v in %s (%v)\nlogs:\n%s", ents, tmpDir, err, lastLines(p.Logs(), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(p.Logs(), "removed abandoned temporary files") {
		t.Errorf("no log line about the collection:\n%s", lastLines(p.Logs(), 20))
	}
	c2 := newS3Client(endpoint)
	resp, body = c2.do(t, "HEAD", "/tmpgc/partial", nil, nil, nil)
	if resp.StatusCode != 404 {
		t.Errorf("HEAD of the interrupted upload: %d %s", resp.StatusCode, body)
	}
	resp, body = c2.do(t, "GET", "/tmpgc/kept", nil, nil, nil)
	if resp.StatusCode != 200 || string(body) != "kept" {
		t.Errorf("GET of an object written before the kill: %d %q", resp.StatusCode, body)
	}
	// New uploads work, and their temporary files go with them.
	resp, body = c2.do(t, "PUT", "/tmpgc/after", nil, nil, []byte("after"))
	mustStatus(t, resp, body, 200)
	if ents, _ := fc2.ReadDirAll(ctx, tmpDir); len(ents) != 0 {
		t.Errorf("temporary files after a PUT: %v", ents)
	}
}
