package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/kv/etcdtest"
)

// TestCopyToEtcd copies a pebble DB into etcd in small batches: every key
// and value arrives, and a second copy into the now full etcd is refused.
func TestCopyToEtcd(t *testing.T) {
	ctx := context.Background()
	src, err := kv.OpenPebble(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	want := map[string]string{"": "empty key"}
	for i := range 1000 {
		want[fmt.Sprintf("k%04d", i)] = fmt.Sprintf("value %d", i)
	}
	err = src.Update(ctx, func(tx kv.Txn) error {
		for k, v := range want {
			tx.Set([]byte(k), []byte(v))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dst := openEtcd(t, kv.EtcdOptions{Endpoints: etcdtest.Start(t), Prefix: "copy/"})
	n, err := kv.Copy(ctx, dst, src, 64)
	if err != nil || n != len(want) {
		t.Fatalf("Copy = %d, %v; want %d keys", n, err, len(want))
	}
	got := map[string]string{}
	err = dst.View(ctx, func(tx kv.Txn) error {
		return tx.Scan(nil, nil, 0, func(k, v []byte) bool { got[string(k)] = string(v); return true })
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d keys in etcd, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("key %q = %q, want %q", k, got[k], v)
		}
	}
	if _, err := kv.Copy(ctx, dst, src, 64); !errors.Is(err, errs.ErrExists) {
		t.Fatalf("copy into a non-empty DB: %v, want exists", err)
	}
}
