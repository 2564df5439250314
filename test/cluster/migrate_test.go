package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/kv/etcdtest"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestMigrateToEtcd moves a single-node file system to etcd: files written
// through `sluice serve` read back through `sluice meta --etcd` and a
// `sluice target` on the same data dir, and new files can be written.
func TestMigrateToEtcd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	serve, addr := proctest.Start(t, binary, nil, servingLine, "serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--http", "")
	c := proctest.Client(t, addr)
	files := map[string][]byte{}
	for i := range 20 {
		p := fmt.Sprintf("/d%d/f%d", i%3, i)
		files[p] = bytes.Repeat([]byte{byte(i)}, 1+i*100_000)
		if err := c.MkdirAll(ctx, fmt.Sprintf("/d%d", i%3), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := proctest.WriteFile(ctx, c, p, files[p]); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if err := serve.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	etcd := strings.Join(etcdtest.Start(t), ",")
	out, err := exec.Command(binary, "meta", "migrate", "--data-dir", dir, "--etcd", etcd).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "copied") {
		t.Fatalf("sluice meta migrate: %v: %s", err, out)
	}
	// A second migration into the same prefix is refused.
	if out, err := exec.Command(binary, "meta", "migrate", "--data-dir", dir, "--etcd", etcd).CombinedOutput(); err == nil || !strings.Contains(string(out), "not empty") {
		t.Fatalf("second migrate: %v: %s", err, out)
	}

	_, maddr := proctest.Start(t, binary, nil, servingLine, "meta", "--etcd", etcd, "--listen", "127.0.0.1:0")
	proctest.Start(t, binary, nil, servingLine, "target", "--data-dir", dir, "--node", "local", "--meta", maddr, "--listen", "127.0.0.1:0")
	c2 := proctest.Client(t, maddr)
	for p, want := range files {
		got, err := readFile(ctx, c2, p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after the migration: %d bytes, %v", p, len(got), err)
		}
	}
	if err := proctest.WriteFile(ctx, c2, "/after", []byte("new")); err != nil {
		t.Fatalf("write after the migration: %v", err)
	}
}
