package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/profile"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestProfileSessions: a recording is started (one per job at a time),
// found by its job's clients (each counted once), takes batches up to its
// bound (the rest counted as dropped), returns them in order and in pages,
// refuses them once over, and is removed with its records.
func TestProfileSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	start := func(name, job string, d time.Duration, max uint64) error {
		return s.ProfileSet(ctx, &wire.ProfileSetReq{Kind: wire.ProfileStart, Session: wire.ProfileSession{
			Name: name, Job: job, Dir: "/data", Until: time.Now().Add(d).UnixNano(), MaxRecords: max}})
	}
	if err := start("r1", "train", time.Hour, 5); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name, job string
		d         time.Duration
		want      error
	}{
		{"r1", "other", time.Hour, errs.ErrExists},
		{"r2", "train", time.Hour, errs.ErrExists}, // the job is recorded already
		{"r/3", "x", time.Hour, errs.ErrInvalid},
		{"", "x", time.Hour, errs.ErrInvalid},
		{"r4", "", time.Hour, errs.ErrInvalid},
		{"r5", "x", -time.Second, errs.ErrInvalid},
	} {
		if err := start(bad.name, bad.job, bad.d, 0); !errors.Is(err, bad.want) {
			t.Errorf("start %q job %q: %v, want %v", bad.name, bad.job, err, bad.want)
		}
	}
	for i, first := range []bool{true, false, true} {
		got, err := s.ProfileCheck(ctx, &wire.ProfileCheckReq{Job: "train", Name: "r1", First: first})
		if err != nil || got.Name != "r1" || got.Dir != "/data" {
			t.Fatalf("check %d: %+v, %v", i, got, err)
		}
	}
	if got, err := s.ProfileCheck(ctx, &wire.ProfileCheckReq{Job: "infer"}); err != nil || got.Name != "" {
		t.Errorf("check of an unrecorded job: %+v, %v", got, err)
	}
	batch := func(n int) []byte {
		b := profile.Batch{Client: "c"}
		for i := range n {
			b.Records = append(b.Records, profile.Record{Op: profile.OpRead, Start: int64(i), Len: 4096})
		}
		return b.Append(nil)
	}
	for i, n := range []int{2, 3} {
		if err := s.ProfileAppend(ctx, &wire.ProfileAppendReq{Name: "r1", Records: uint32(n), Batch: batch(n)}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if err := s.ProfileAppend(ctx, &wire.ProfileAppendReq{Name: "r1", Records: 1, Dropped: 7, Batch: batch(1)}); !errors.Is(err, errs.ErrNoSpace) {
		t.Errorf("append past the bound: %v, want ENOSPC", err)
	}
	if err := s.ProfileAppend(ctx, &wire.ProfileAppendReq{Name: "r1", Records: 1, Batch: []byte{9, 9}}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("append of a malformed batch: %v, want EINVAL", err)
	}
	if err := s.ProfileAppend(ctx, &wire.ProfileAppendReq{Name: "nope", Records: 1, Batch: batch(1)}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("append to no recording: %v", err)
	}
	l, err := s.ProfileList(ctx)
	if err != nil || len(l) != 1 {
		t.Fatalf("list: %+v, %v", l, err)
	}
	if g := l[0]; g.Records != 5 || g.Dropped != 8 || g.Clients != 2 || g.Batches != 2 || g.Job != "train" {
		t.Errorf("recording %+v: want 5 records, 8 dropped, 2 clients, 2 batches", g)
	}
	// Pages of one batch each (the bound is below two batches).
	var got []int
	after := uint64(0)
	for {
		r, err := s.ProfileRead(ctx, &wire.ProfileReadReq{Name: "r1", After: after, MaxBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range r.Batches {
			b, err := profile.Decode(p)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, len(b.Records))
		}
		after = r.Next
		if !r.More {
			break
		}
	}
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Errorf("batches read: %v, want [2 3]", got)
	}

	// Stopped: the job's clients find none, a new recording of the job may
	// start, and batches are taken for a grace period only.
	if err := s.ProfileSet(ctx, &wire.ProfileSetReq{Kind: wire.ProfileStop, Session: wire.ProfileSession{Name: "r1"}}); err != nil {
		t.Fatal(err)
	}
	if g, err := s.ProfileCheck(ctx, &wire.ProfileCheckReq{Job: "train"}); err != nil || g.Name != "" {
		t.Errorf("check after stop: %+v, %v", g, err)
	}
	if err := start("r2", "train", time.Hour, 0); err != nil {
		t.Errorf("a second recording of the job after the first stopped: %v", err)
	}
	if err := s.ProfileSet(ctx, &wire.ProfileSetReq{Kind: wire.ProfileRemove, Session: wire.ProfileSession{Name: "r1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ProfileRead(ctx, &wire.ProfileReadReq{Name: "r1"}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("read of a removed recording: %v", err)
	}
	if g, err := s.ProfileCheck(ctx, &wire.ProfileCheckReq{Job: "train"}); err != nil || g.Name != "r2" || g.MaxRecords != DefaultProfileRecords {
		t.Errorf("check finds %+v, %v; want r2 with the default bound", g, err)
	}
}
