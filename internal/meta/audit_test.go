package meta

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// listAudit returns every entry AuditList returns for req, page by page.
func listAudit(t *testing.T, s *Service, req wire.AuditListReq) ([]uint64, []audit.Entry) {
	t.Helper()
	var seqs []uint64
	var out []audit.Entry
	for {
		r, err := s.AuditList(context.Background(), &req)
		if err != nil {
			t.Fatalf("AuditList: %v", err)
		}
		for _, rec := range r.Entries {
			e, err := audit.Decode(rec.Record)
			if err != nil {
				t.Fatalf("entry %d: %v", rec.Seq, err)
			}
			seqs = append(seqs, rec.Seq)
			out = append(out, e)
		}
		if r.Next == 0 {
			return seqs, out
		}
		req.After = r.Next
	}
}

func verifyAudit(t *testing.T, s *Service) wire.AuditVerifyResp {
	t.Helper()
	r, err := s.AuditVerify(context.Background())
	if err != nil {
		t.Fatalf("AuditVerify: %v", err)
	}
	return r
}

func countKeys(t *testing.T, db kv.DB, prefix []byte) int {
	t.Helper()
	n := 0
	err := db.View(context.Background(), func(tx kv.Txn) error {
		n = 0
		return tx.Scan(prefix, kv.PrefixEnd(prefix), 0, func(k, v []byte) bool { n++; return true })
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAudit makes each audited kind of change, lists the trail, filters it,
// then tampers with the stored chain (edit, delete, swap, truncate) and
// checks that verify names the entry each time. TestEngines runs it on the
// pebble and etcd engines.
func TestAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	admin := &wire.Cred{Uid: 0, Gid: 0}
	user := &wire.Cred{Uid: 1000, Gid: 100}

	d := mustMkdir(t, s, RootIno, "d")
	a := mustCreate(t, s, d.Ino, "a")
	b := mustCreate(t, s, d.Ino, "b")
	x := mustCreate(t, s, d.Ino, "x")
	if _, err := s.SetAttr(ctx, &wire.SetAttrReq{Ino: a.Ino, Valid: wire.SetMode, Mode: 0o600, Cred: user}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetAttr(ctx, &wire.SetAttrReq{Ino: a.Ino, Valid: wire.SetUid | wire.SetGid, Uid: 7, Gid: 8, Cred: admin}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetAttr(ctx, &wire.SetAttrReq{Ino: a.Ino, Valid: wire.SetSize, Size: 0}); err != nil {
		t.Fatal(err) // not audited: a truncate
	}
	if err := s.SetLayout(WithCred(ctx, admin), d.Ino, placement.Layout{StripeSize: 1 << 20, StripeCount: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(ctx, &wire.RenameReq{OldParent: d.Ino, OldName: "a", NewParent: d.Ino, NewName: "x", Cred: user}); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlink(WithCred(ctx, user), d.Ino, "b"); err != nil {
		t.Fatal(err)
	}
	sub := mustMkdir(t, s, d.Ino, "sub")
	if err := s.Rmdir(ctx, d.Ino, "sub"); err != nil {
		t.Fatal(err)
	}

	seqs, got := listAudit(t, s, wire.AuditListReq{})
	type want struct {
		op      audit.Op
		ino     uint64
		who     audit.Who
		changes []audit.Change
	}
	wants := []want{
		{audit.OpSetAttr, a.Ino, audit.Who{Known: true, Uid: 1000, Gid: 100}, []audit.Change{{Field: "mode", Old: "0644", New: "0600"}}},
		{audit.OpSetAttr, a.Ino, audit.Who{Known: true}, []audit.Change{{Field: "uid", Old: "0", New: "7"}, {Field: "gid", Old: "0", New: "8"}}},
		{audit.OpSetLayout, d.Ino, audit.Who{Known: true}, []audit.Change{{Field: "layout",
			Old: placement.Layout{}.String(), New: placement.Layout{StripeSize: 1 << 20, StripeCount: 2}.String()}}},
		{audit.OpRename, a.Ino, audit.Who{Known: true, Uid: 1000, Gid: 100}, nil},
		{audit.OpUnlink, b.Ino, audit.Who{Known: true, Uid: 1000, Gid: 100}, nil},
		{audit.OpRmdir, sub.Ino, audit.Who{}, nil},
	}
	if len(got) != len(wants) {
		t.Fatalf("listed %d entries, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		e := got[i]
		if seqs[i] != uint64(i+1) || e.Op != w.op || e.Ino != w.ino || e.Who != w.who || !slices.Equal(e.Changes, w.changes) {
			t.Errorf("entry %d = %d %+v, want op %v ino %d who %+v changes %+v", i+1, seqs[i], e, w.op, w.ino, w.who, w.changes)
		}
		if i > 0 && e.Time < got[i-1].Time {
			t.Errorf("entry %d is older than entry %d", i+1, i)
		}
	}
	if r := got[3]; r.Parent != d.Ino || r.Name != "a" || r.NewParent != d.Ino || r.NewName != "x" || r.Replaced != x.Ino {
		t.Errorf("rename entry %+v: want d/a -> d/x replacing %d", r, x.Ino)
	}
	if u := got[4]; u.Parent != d.Ino || u.Name != "b" {
		t.Errorf("unlink entry %+v: want d/b", u)
	}
	if n := countKeys(t, s.db, auditPendingPrefix); n != 0 {
		t.Errorf("%d pending records after a listing sealed them", n)
	}

	// Filters: by path (the file now at /d/x: its setattrs, its rename and
	// the replacement of the old x), inside a directory, and by time.
	if seqs, _ := listAudit(t, s, wire.AuditListReq{Path: "/d/x"}); !slices.Equal(seqs, []uint64{1, 2, 4}) {
		t.Errorf("--path /d/x listed %v, want [1 2 4]", seqs)
	}
	if seqs, _ := listAudit(t, s, wire.AuditListReq{Path: "/d/b"}); !slices.Equal(seqs, []uint64{5}) {
		t.Errorf("--path /d/b (removed) listed %v, want [5]", seqs)
	}
	if seqs, _ := listAudit(t, s, wire.AuditListReq{Path: "/d"}); !slices.Equal(seqs, []uint64{3, 4, 5, 6}) {
		t.Errorf("--path /d listed %v, want [3 4 5 6]", seqs)
	}
	if seqs, _ := listAudit(t, s, wire.AuditListReq{Since: got[4].Time}); !slices.Equal(seqs, []uint64{5, 6}) {
		t.Errorf("--since entry 5's time listed %v, want [5 6]", seqs)
	}
	if seqs, _ := listAudit(t, s, wire.AuditListReq{Limit: 2}); !slices.Equal(seqs, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("pages of 2 listed %v", seqs)
	}

	r := verifyAudit(t, s)
	if r.BrokenSeq != 0 || r.Entries != 6 || r.HeadSeq != 6 {
		t.Fatalf("verify of an intact trail: %+v", r)
	}

	// Tampering, each undone before the next.
	raw := func(seq uint64) []byte {
		var v []byte
		err := s.db.View(ctx, func(tx kv.Txn) (err error) {
			v, err = tx.Get(auditEntryKey(seq))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	put := func(kvs map[uint64][]byte) {
		err := s.db.Update(ctx, func(tx kv.Txn) error {
			for seq, v := range kvs {
				if v == nil {
					tx.Delete(auditEntryKey(seq))
				} else {
					tx.Set(auditEntryKey(seq), v)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	orig := map[uint64][]byte{}
	for seq := uint64(1); seq <= 6; seq++ {
		orig[seq] = raw(seq)
	}
	edited := slices.Clone(orig[3])
	edited[len(edited)-1] ^= 0x20 // a byte of the last change's text
	for _, c := range []struct {
		name   string
		tamper map[uint64][]byte
		at     uint64
	}{
		{"edit", map[uint64][]byte{3: edited}, 3},
		{"delete", map[uint64][]byte{4: nil}, 4},
		{"swap", map[uint64][]byte{2: orig[5], 5: orig[2]}, 2},
		{"truncate", map[uint64][]byte{6: nil}, 6},
	} {
		put(c.tamper)
		r := verifyAudit(t, s)
		if r.BrokenSeq != c.at || r.Reason == "" {
			t.Errorf("%s: verify reported %+v, want entry %d", c.name, r, c.at)
		} else {
			t.Logf("%s: entry %d: %s", c.name, r.BrokenSeq, r.Reason)
		}
		put(orig)
		if r := verifyAudit(t, s); r.BrokenSeq != 0 {
			t.Fatalf("after undoing %s: %+v", c.name, r)
		}
	}

	// The chain goes on after verification: a later change is sealed
	// behind entry 6.
	if _, err := s.SetAttr(ctx, &wire.SetAttrReq{Ino: x.Ino, Valid: wire.SetMode, Mode: 0o640}); err == nil {
		t.Fatal("setattr of the replaced inode succeeded")
	}
	if _, err := s.SetAttr(ctx, &wire.SetAttrReq{Ino: a.Ino, Valid: wire.SetMode, Mode: 0o640}); err != nil {
		t.Fatal(err)
	}
	if r := verifyAudit(t, s); r.BrokenSeq != 0 || r.Entries != 7 {
		t.Fatalf("after one more change: %+v", r)
	}
}

// TestAuditConcurrent: concurrent audited changes all reach the chain, in
// one unbroken sequence, and the background sealer (Run) seals them
// without a listing.
func TestAuditConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(runCtx) })
	defer func() { stop(); wg.Wait() }()

	const workers, per = 8, 25
	var mk sync.WaitGroup
	for w := range workers {
		mk.Go(func() {
			for i := range per {
				name := fmt.Sprintf("w%d-%d", w, i)
				mustCreate(t, s, RootIno, name)
				if err := s.Unlink(ctx, RootIno, name); err != nil {
					t.Error(err)
				}
			}
		})
	}
	mk.Wait()
	for deadline := time.Now().Add(30 * time.Second); countKeys(t, s.db, auditPendingPrefix) != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the background sealer left %d records pending", countKeys(t, s.db, auditPendingPrefix))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := verifyAudit(t, s); r.BrokenSeq != 0 || r.Entries != workers*per {
		t.Fatalf("verify: %+v, want %d entries", r, workers*per)
	}
}

// TestAuditOff: with Options.NoAudit, changes write no audit records.
func TestAuditOff(t *testing.T) {
	t.Parallel()
	db := openTestDB(t)
	s, err := New(context.Background(), Options{DB: db, Targets: newFakeTargets(4), NoAudit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustCreate(t, s, RootIno, "f")
	if err := s.Unlink(context.Background(), RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, db, []byte{pfxAudit}); n != 0 {
		t.Fatalf("%d audit keys with the trail off", n)
	}
	if r := verifyAudit(t, s); r.BrokenSeq != 0 || r.Entries != 0 {
		t.Fatalf("verify of an empty trail: %+v", r)
	}
}

func auditEntrySample() audit.Entry {
	return audit.Entry{Op: audit.OpUnlink, Ino: 123456, Parent: 99, Name: "file-000123.jpg", Who: audit.Who{Known: true, Uid: 1000, Gid: 1000}}
}

// TestAuditPolicy: the tier policy (an xattr trusted.sluice.*) and the
// absorb policy of a directory are audited when set, changed and removed,
// with who and the values before and after; other xattrs are not.
func TestAuditPolicy(t *testing.T) {
	t.Parallel()
	ctx := WithCred(context.Background(), &wire.Cred{Uid: 42, Gid: 7})
	s := newTestService(t, nil, nil)
	d := mustMkdir(t, s, RootIno, "d")
	const name = "trusted.sluice.tier-policy"
	for _, v := range []string{"v1 archive-after=30m0s", "v1 release-after=1h0m0s"} {
		if err := s.SetXattr(ctx, &wire.XattrReq{Ino: d.Ino, Name: name, Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetXattr(ctx, &wire.XattrReq{Ino: d.Ino, Name: "user.note", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveXattr(ctx, d.Ino, name); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAbsorb(ctx, d.Ino, wire.AbsorbOn); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAbsorb(ctx, d.Ino, wire.AbsorbInherit); err != nil {
		t.Fatal(err)
	}
	_, es := listAudit(t, s, wire.AuditListReq{})
	var got []string
	for _, e := range es {
		if e.Op != audit.OpPolicy {
			continue
		}
		if e.Ino != d.Ino || !e.Who.Known || e.Who.Uid != 42 || len(e.Changes) != 1 {
			t.Errorf("entry %+v", e)
			continue
		}
		got = append(got, e.Name+": "+e.Changes[0].Old+" -> "+e.Changes[0].New)
	}
	want := []string{
		name + ": none -> v1 archive-after=30m0s",
		name + ": v1 archive-after=30m0s -> v1 release-after=1h0m0s",
		name + ": v1 release-after=1h0m0s -> none",
		"absorb: none -> on",
		"absorb: on -> none",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("policy entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
