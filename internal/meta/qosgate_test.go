package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestQosMetaLimit: a job's limit on the metadata service is set, listed,
// audited and applied to the scheduler at once; its connections'
// namespace requests then go at most at its rate while another job's go
// through, each counted under its declared class; removing the job's
// limits lets its backlog through. Statfs is scheduled, the settings
// themselves are not.
func TestQosMetaLimit(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, Options{DB: openTestDB(t), Targets: newFakeTargets(4), QosInService: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := &wire.Server{}
	s.Register(srv)
	addr := serve(t, srv)
	dial := func(job string, class uint8) *wire.Conn {
		c, err := wire.Dial(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Call(ctx, wire.OpSession, &wire.SessionReq{Qos: wire.QosTag{Job: job, Class: class}}, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		return c
	}
	storm, infer, admin := dial("storm", 4), dial("infer", 1), dial("", 0)

	const rate, burst = 20, 5
	if _, err := admin.Call(ctx, wire.OpQosSet, &wire.QosSetReq{Kind: wire.QosSetJobMeta, Job: "storm", Rate: rate, Burst: burst}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if st := s.QosStats(); st.LimitedJobs != 1 {
		t.Fatalf("%d limited jobs in the scheduler after the set, want 1", st.LimitedJobs)
	}
	var cfg wire.QosConfig
	if _, err := admin.Call(ctx, wire.OpQosList, &wire.Empty{}, nil, &cfg, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.MetaJobs, []wire.QosJob{{Job: "storm", Rate: rate, Burst: burst}}) || len(cfg.Jobs) != 0 {
		t.Fatalf("settings %+v, want storm's metadata limit only", cfg)
	}

	// The storm: 8 callers of stat (GetAttr of the root) and statfs.
	start := time.Now()
	var done atomic.Int64
	var wg sync.WaitGroup
	stormCtx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range 8 {
		wg.Go(func() {
			for stormCtx.Err() == nil {
				op, req, resp := wire.OpGetAttr, wire.Message(&wire.InoReq{Ino: RootIno}), wire.Message(&wire.Attr{})
				if i%2 == 1 {
					op, req, resp = wire.OpStatfs, &wire.Empty{}, &wire.StatfsResp{}
				}
				if _, err := storm.Call(ctx, op, req, nil, resp, nil); err != nil {
					t.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	// While it is held back, the other job's requests are served, and so
	// are the settings.
	for done.Load() < burst {
		time.Sleep(time.Millisecond)
	}
	for range 50 {
		if _, err := infer.Call(ctx, wire.OpGetAttr, &wire.InoReq{Ino: RootIno}, nil, &wire.Attr{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Call(ctx, wire.OpQosList, &wire.Empty{}, nil, &wire.QosConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	n, elapsed := done.Load(), time.Since(start)
	// The token bucket's bound: the burst, the rate since the start, and
	// the requests in service when the limit was counted.
	if bound := burst + int64(rate*elapsed.Seconds()) + 2; n > bound {
		t.Errorf("the limited job made %d requests in %v, over its bound of %d", n, elapsed, bound)
	}
	st := s.QosStats()
	if c := st.Classes["interactive"]; c.Served != 50 {
		t.Errorf("interactive served %d, want the 50 requests of job infer", c.Served)
	}
	if c := st.Classes["background"]; c.Served < uint64(n) || c.Queued == 0 {
		t.Errorf("background served %d (%d done) with %d queued; want the storm's, with a backlog", c.Served, n, c.Queued)
	}
	var jobs []string
	for _, j := range st.Jobs {
		jobs = append(jobs, j.Job)
	}
	if !slices.Contains(jobs, "storm") || !slices.Contains(jobs, "infer") {
		t.Errorf("jobs counted: %v, want storm and infer", jobs)
	}

	// Lifting the limits lets the backlog through.
	if _, err := admin.Call(ctx, wire.OpQosSet, &wire.QosSetReq{Kind: wire.QosRemoveJob, Job: "storm"}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	before := done.Load()
	for done.Load() < before+100 {
		time.Sleep(time.Millisecond)
	}
	stop()
	wg.Wait()
	if _, err := admin.Call(ctx, wire.OpQosSet, &wire.QosSetReq{Kind: wire.QosRemoveJob, Job: "storm"}, nil, nil, nil); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("removing limits twice: %v, want not found", err)
	}
	_, got := listAudit(t, s, wire.AuditListReq{})
	want := [][]audit.Change{
		{{Field: "meta-limit", Old: "none", New: "rate=20 burst=5"}},
		{{Field: "meta-limit", Old: "rate=20 burst=5", New: "none"}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d audit entries, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Name != "job:storm" || !slices.Equal(got[i].Changes, w) {
			t.Errorf("audit entry %d = %+v, want %+v", i+1, got[i], w)
		}
	}
}

// TestQosMetaOff: with QoS off every request goes at once whatever the
// limits, still counted by class.
func TestQosMetaOff(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, Options{DB: openTestDB(t), Targets: newFakeTargets(4), QosOff: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.QosSet(ctx, &wire.QosSetReq{Kind: wire.QosSetJobMeta, Job: "storm", Rate: 1, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	c := sessionConn(t, s, wire.QosTag{Job: "storm", Class: 3})
	for range 20 {
		if _, err := c.Call(ctx, wire.OpGetAttr, &wire.InoReq{Ino: RootIno}, nil, &wire.Attr{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.QosStats(); st.On || st.Classes["checkpoint"].Served != 20 {
		t.Errorf("stats %+v, want off with 20 checkpoint requests", st)
	}
	if err := s.QosSet(ctx, &wire.QosSetReq{Kind: wire.QosSetJobMeta, Job: "x", Rate: 1}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("a metadata limit without a burst: %v, want invalid", err)
	}
}

// TestQosMetaReadDirCharged: a listing is charged for its entries (one
// request and one more per wire.ReadDirPerLookup names, or per
// wire.ReadDirPlusPerLookup names with attributes): a limited job that lists a
// big directory owes the rest, and its next request waits for its bucket.
func TestQosMetaReadDirCharged(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, Options{DB: openTestDB(t), Targets: newFakeTargets(4)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	const files = 256
	d := mustMkdir(t, s, RootIno, "d")
	for i := range files {
		mustCreateInline(t, s, d.Ino, fmt.Sprintf("f%03d", i))
	}
	c := sessionConn(t, s, wire.QosTag{Job: "ls", Class: 2})
	served := func() uint64 { return jobServed(s, "ls") }
	for _, plus := range []bool{false, true} {
		before := served()
		var page wire.ReadDirResp
		if _, err := c.Call(ctx, wire.OpReadDir, &wire.ReadDirReq{Ino: d.Ino, Limit: 1024, Plus: plus}, nil, &page, nil); err != nil {
			t.Fatal(err)
		}
		if len(page.Entries) != files {
			t.Fatalf("listed %d entries, want %d", len(page.Entries), files)
		}
		per := wire.ReadDirPerLookup
		if plus {
			per = wire.ReadDirPlusPerLookup
		}
		if got, want := served()-before, uint64(1+files/per); got != want {
			t.Errorf("a listing of %d entries (plus %v) cost %d, want %d", files, plus, got, want)
		}
	}

	// 1 request a second, burst 10: a listing with attributes (17)
	// leaves the job 7 in debt; a stat then waits 8 s for the bucket
	// (here, until the limit is lifted).
	if err := s.QosSet(ctx, &wire.QosSetReq{Kind: wire.QosSetJobMeta, Job: "ls", Rate: 1, Burst: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, wire.OpReadDir, &wire.ReadDirReq{Ino: d.Ino, Limit: 1024, Plus: true}, nil, &wire.ReadDirResp{}, nil); err != nil {
		t.Fatal(err)
	}
	statted := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, wire.OpGetAttr, &wire.InoReq{Ino: RootIno}, nil, &wire.Attr{}, nil)
		statted <- err
	}()
	queued := func() bool {
		for _, j := range s.QosStats().Jobs {
			if j.Job == "ls" && j.Queued == 1 {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(5 * time.Second); !queued(); time.Sleep(2 * time.Millisecond) {
		select {
		case err := <-statted:
			t.Fatalf("the stat after a listing that overdrew the bucket went at once (%v)", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the stat never queued")
		}
	}
	if err := s.QosSet(ctx, &wire.QosSetReq{Kind: wire.QosRemoveJob, Job: "ls"}); err != nil {
		t.Fatal(err)
	}
	if err := <-statted; err != nil {
		t.Fatal(err)
	}
}

// TestQosMetaImportCharged: a batch import (OpTierImport) costs its job one
// unit per entry, as the creates it takes the place of would.
func TestQosMetaImportCharged(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, Options{DB: openTestDB(t), Targets: newFakeTargets(4)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addTestBackend(t, s)
	c := sessionConn(t, s, wire.QosTag{Job: "imp", Class: 3})
	const n = 100
	req := &wire.TierImportReq{Parent: RootIno, Backend: "b", Mode: 0o644}
	for i := range n {
		req.Entries = append(req.Entries, wire.TierImportEntry{Name: fmt.Sprintf("f%03d", i), Key: fmt.Sprint(i), Size: 1, ETag: "e"})
	}
	var resp wire.TierImportResp
	if _, err := c.Call(ctx, wire.OpTierImport, req, nil, &resp, nil); err != nil || len(resp.Results) != n {
		t.Fatalf("import: %d results, %v", len(resp.Results), err)
	}
	if served := jobServed(s, "imp"); served != n {
		t.Errorf("an import of %d entries cost its job %d, want %d", n, served, n)
	}
}

// sessionConn connects to s's handlers (the QoS gate in front of them) on
// loopback and declares tag for the connection; it closes when the test
// ends.
func sessionConn(t *testing.T, s *Service, tag wire.QosTag) *wire.Conn {
	t.Helper()
	ctx := context.Background()
	srv := &wire.Server{}
	s.Register(srv)
	c, err := wire.Dial(ctx, serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Call(ctx, wire.OpSession, &wire.SessionReq{Qos: tag}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// jobServed is what the metadata service's QoS gate served job so far.
func jobServed(s *Service, job string) uint64 {
	for _, j := range s.QosStats().Jobs {
		if j.Job == job {
			return j.ServedBytes
		}
	}
	return 0
}
