package meta

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestQos: weights and job limits set, listed (defaults filled in),
// removed, refused when invalid, and each change audited with its old and
// new value.
func TestQos(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)

	cfg, err := s.QosList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Weights, []uint32{8, 4, 2, 1}) || len(cfg.Jobs) != 0 {
		t.Fatalf("fresh settings %+v, want the default weights and no jobs", cfg)
	}
	for _, req := range []wire.QosSetReq{
		{Kind: wire.QosSetWeight, Class: uint8(qos.Checkpoint), Weight: 3},
		{Kind: wire.QosSetJob, Job: "ckpt", Rate: 1 << 20, Burst: 4 << 20},
		{Kind: wire.QosSetJob, Job: "bulk", Rate: 100, Burst: 200},
		{Kind: wire.QosSetJob, Job: "ckpt", Rate: 2 << 20, Burst: 4 << 20},
		{Kind: wire.QosRemoveJob, Job: "bulk"},
	} {
		if err := s.QosSet(ctx, &req); err != nil {
			t.Fatalf("set %+v: %v", req, err)
		}
	}
	cfg, err = s.QosList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Weights, []uint32{8, 4, 3, 1}) || !slices.Equal(cfg.Jobs, []wire.QosJob{{Job: "ckpt", Rate: 2 << 20, Burst: 4 << 20}}) {
		t.Errorf("settings %+v", cfg)
	}
	for _, bad := range []struct {
		req  wire.QosSetReq
		want error
	}{
		{wire.QosSetReq{Kind: wire.QosSetWeight, Class: 4, Weight: 1}, errs.ErrInvalid},
		{wire.QosSetReq{Kind: wire.QosSetJob, Job: "x", Rate: 1}, errs.ErrInvalid},
		{wire.QosSetReq{Kind: wire.QosSetJob, Rate: 1, Burst: 1}, errs.ErrInvalid},
		{wire.QosSetReq{Kind: wire.QosRemoveJob, Job: "never"}, errs.ErrNotFound},
		{wire.QosSetReq{Kind: 9}, errs.ErrInvalid},
	} {
		if err := s.QosSet(ctx, &bad.req); !errors.Is(err, bad.want) {
			t.Errorf("set %+v: %v, want %v", bad.req, err, bad.want)
		}
	}
	// Back to the default weight.
	if err := s.QosSet(ctx, &wire.QosSetReq{Kind: wire.QosSetWeight, Class: uint8(qos.Checkpoint)}); err != nil {
		t.Fatal(err)
	}
	if cfg, _ := s.QosList(ctx); cfg.Weights[qos.Checkpoint] != 2 {
		t.Errorf("weight 0 left checkpoint at %d, want the default 2", cfg.Weights[qos.Checkpoint])
	}

	_, got := listAudit(t, s, wire.AuditListReq{})
	want := []struct{ name, field, old, new string }{
		{"class:checkpoint", "weight", "2", "3"},
		{"job:ckpt", "limit", "none", "rate=1048576 burst=4194304"},
		{"job:bulk", "limit", "none", "rate=100 burst=200"},
		{"job:ckpt", "limit", "rate=1048576 burst=4194304", "rate=2097152 burst=4194304"},
		{"job:bulk", "limit", "rate=100 burst=200", "none"},
		{"class:checkpoint", "weight", "3", "2"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d audit entries, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		e := got[i]
		if e.Op != audit.OpQos || e.Name != w.name || !slices.Equal(e.Changes, []audit.Change{{Field: w.field, Old: w.old, New: w.new}}) {
			t.Errorf("audit entry %d = %+v, want %+v", i+1, e, w)
		}
	}
}
