package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestRestart starts a server, writes, restarts it on the same directory
// and URLs, and reads the write back; Stop is idempotent.
func TestRestart(t *testing.T) {
	start := time.Now()
	dir := t.TempDir()
	s := StartServerFor(t, Options{Dir: dir})
	t.Logf("etcd started in %v at %v", time.Since(start), s.Endpoints())
	c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Stop()
	s = StartServerFor(t, Options{Dir: dir, ClientURL: s.Endpoints()[0], PeerURL: s.PeerURL()})
	r, err := c.Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("Get after restart = %v, %v", r, err)
	}
	if _, err := StartServer(Options{}); err == nil {
		t.Fatal("StartServer without a directory succeeded")
	}
}
