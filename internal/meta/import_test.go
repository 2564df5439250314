package meta

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestTierImportBatch: one OpTierImport makes released files of the valid
// entries, refuses the invalid ones each with its reason, never replaces
// an existing name, and counts its own earlier files as imported before;
// in groups of transactions as with etcd too.
func TestTierImportBatch(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprint("shared=", shared), func(t *testing.T) {
			ctx := context.Background()
			s := newTestService(t, nil, nil)
			s.shared = shared
			req := &wire.TierImportReq{Parent: RootIno, Backend: "b", Mode: 0o640, Cred: wire.Cred{Uid: 7, Gid: 8}}
			for i := range 100 {
				req.Entries = append(req.Entries, wire.TierImportEntry{Name: fmt.Sprintf("f%03d", i), Key: fmt.Sprintf("k/f%03d", i), Size: uint64(1000 + i), Mtime: int64(5000 + i), ETag: "e"})
			}
			req.Entries = append(req.Entries,
				wire.TierImportEntry{Name: "bad/name", Key: "k1", Size: 1, ETag: "e"},
				wire.TierImportEntry{Name: "empty", Key: "k2", Size: 0, ETag: "e"},
				wire.TierImportEntry{Name: "noetag", Key: "k3", Size: 1},
				wire.TierImportEntry{Name: "mine", Key: "k4", Size: 1, ETag: "e"},
			)
			_, err := s.TierImport(ctx, req)
			wantCode(t, "import to an unknown backend", err, errs.NotFound)
			addTestBackend(t, s)
			mine := mustCreate(t, s, RootIno, "mine")
			r, err := s.TierImport(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			want := func(i int) uint8 {
				switch {
				case i < 100:
					return wire.ImportMade
				case i < 103:
					return wire.ImportInvalid
				}
				return wire.ImportExists
			}
			for i, got := range r.Results {
				if got != want(i) {
					t.Fatalf("entry %d (%s): result %d, want %d", i, req.Entries[i].Name, got, want(i))
				}
			}
			if len(r.Errors) != 3 {
				t.Fatalf("reasons %q, want one per invalid entry", r.Errors)
			}
			e, err := s.Lookup(ctx, RootIno, "f042")
			if err != nil || e.Flags&wire.AttrReleased == 0 || e.Size != 1042 || e.Mtime != 5042 || e.Uid != 7 || e.Mode&0o777 != 0o640 {
				t.Fatalf("imported file: %+v, %v", e, err)
			}
			if rec, err := s.HsmGet(ctx, e.Ino); err != nil || rec.State != wire.HsmReleased || rec.ETag != "e" || rec.Key != "k/f042" || rec.Gen != 0 {
				t.Fatalf("imported file's record: %+v, %v", rec, err)
			}
			if a, err := s.GetAttr(ctx, mine.Ino); err != nil || a.Flags&wire.AttrReleased != 0 {
				t.Fatalf("the existing file was changed: %+v, %v", a, err)
			}
			// Again: the files made count as imported before; another
			// object under a made name exists.
			req.Entries[1].Key = "other"
			r, err = s.TierImport(ctx, req)
			if err != nil || r.Results[0] != wire.ImportPresent || r.Results[1] != wire.ImportExists || r.Results[99] != wire.ImportPresent {
				t.Fatalf("import again: %v, %v", r.Results, err)
			}
			big := &wire.TierImportReq{Parent: RootIno, Backend: "b", Entries: make([]wire.TierImportEntry, MaxImportBatch+1)}
			_, err = s.TierImport(ctx, big)
			wantCode(t, "an import over the batch limit", err, errs.TooBig)
		})
	}
}

// TestImportAgain: the decision of a re-run for a file an earlier import
// made: the same object is imported before; a changed one is taken only by
// a released file whose restore lease nobody holds, and only when asked.
func TestImportAgain(t *testing.T) {
	t.Parallel()
	rec := func(state uint8, etag string, size uint64, mtime int64) wire.HsmRecord {
		return wire.HsmRecord{State: state, Backend: "b", Key: "k", Size: size, Mtime: mtime, ETag: etag}
	}
	fresh := rec(wire.HsmReleased, "e2", 20, 200)
	const now = 1000
	for _, tc := range []struct {
		name    string
		cur     wire.HsmRecord
		lease   restoreLease
		fresh   wire.HsmRecord
		refresh bool
		want    uint8
		take    bool // the next record is fresh
		dirty   bool // the next record is cur made dirty
	}{
		{"same ETag and size", rec(wire.HsmReleased, "e2", 20, 100), restoreLease{}, fresh, true, wire.ImportPresent, false, false},
		{"another ETag, not asked", rec(wire.HsmReleased, "e1", 20, 100), restoreLease{}, fresh, false, wire.ImportPresent, false, false},
		{"another ETag", rec(wire.HsmReleased, "e1", 20, 100), restoreLease{}, fresh, true, wire.ImportUpdated, true, false},
		{"same ETag, another size", rec(wire.HsmReleased, "e2", 10, 200), restoreLease{}, fresh, true, wire.ImportUpdated, true, false},
		{"no ETag, same size and mtime", rec(wire.HsmReleased, "", 20, 200), restoreLease{}, fresh, true, wire.ImportPresent, false, false},
		{"no ETag, another mtime", rec(wire.HsmReleased, "", 20, 100), restoreLease{}, fresh, true, wire.ImportUpdated, true, false},
		{"restored (archived)", rec(wire.HsmArchived, "e1", 20, 100), restoreLease{}, fresh, true, wire.ImportChanged, false, true},
		{"restored and written (dirty)", rec(wire.HsmDirty, "e1", 20, 100), restoreLease{}, fresh, true, wire.ImportChanged, false, false},
		{"being restored", rec(wire.HsmReleased, "e1", 20, 100), restoreLease{Owner: 7, Expires: now + 1}, fresh, true, wire.ImportChanged, false, false},
		{"its restore's lease ran out", rec(wire.HsmReleased, "e1", 20, 100), restoreLease{Owner: 7, Expires: now}, fresh, true, wire.ImportUpdated, true, false},
	} {
		got, next, ok := importAgain(tc.cur, tc.lease, tc.fresh, tc.refresh, now)
		dirty := tc.cur
		dirty.State = wire.HsmDirty
		switch {
		case got != tc.want || ok != (tc.take || tc.dirty):
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.take || tc.dirty)
		case tc.take && !reflect.DeepEqual(next, tc.fresh):
			t.Errorf("%s: next record %+v, want the fresh one", tc.name, next)
		case tc.dirty && !reflect.DeepEqual(next, dirty):
			t.Errorf("%s: next record %+v, want the file's made dirty", tc.name, next)
		}
	}
}

// TestTierImportRefresh: a re-run with Refresh makes the released file of
// an object that changed in the bucket the new object (size, mtime, ETag;
// the restore of the old one can no longer commit), and leaves a file
// that was restored, or is being restored, as it is.
func TestTierImportRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	s.now = func() time.Time { return time.Unix(0, clock.Load()) }
	addTestBackend(t, s)
	entry := func(name, etag string, size uint64, mtime int64) wire.TierImportEntry {
		return wire.TierImportEntry{Name: name, Key: "k/" + name, Size: size, Mtime: mtime, ETag: etag}
	}
	imp := func(refresh bool, es ...wire.TierImportEntry) []uint8 {
		t.Helper()
		r, err := s.TierImport(ctx, &wire.TierImportReq{Parent: RootIno, Backend: "b", Mode: 0o644, Entries: es, Refresh: refresh})
		if err != nil {
			t.Fatal(err)
		}
		return r.Results
	}
	imp(false, entry("a", "e1", 10, 100), entry("b", "e1", 10, 100), entry("c", "e1", 10, 100))
	ino := func(name string) uint64 {
		a, err := s.Lookup(ctx, RootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	// b is being restored by client 1; c was restored.
	if _, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: ino("b"), Owner: 1, LeaseMs: 60000}); err != nil {
		t.Fatal(err)
	}
	restoreIn(t, s, ino("c"), 2)
	changed := []wire.TierImportEntry{entry("a", "e2", 25, 300), entry("b", "e2", 25, 300), entry("c", "e2", 25, 300)}
	if got := imp(false, changed...); got[0] != wire.ImportPresent || got[1] != wire.ImportPresent || got[2] != wire.ImportPresent {
		t.Fatalf("a re-run without refresh: %v, want every file imported before", got)
	}
	if a, _ := s.GetAttr(ctx, ino("a")); a.Size != 10 {
		t.Fatalf("a re-run without refresh changed a: %+v", a)
	}
	got := imp(true, changed...)
	if got[0] != wire.ImportUpdated || got[1] != wire.ImportChanged || got[2] != wire.ImportChanged {
		t.Fatalf("a re-run with refresh: %v, want updated, changed, changed", got)
	}
	a, err := s.GetAttr(ctx, ino("a"))
	if err != nil || a.Size != 25 || a.Mtime != 300 || a.Flags&wire.AttrReleased == 0 {
		t.Fatalf("the refreshed file: %+v, %v; want size 25, mtime 300, released", a, err)
	}
	if rec, err := s.HsmGet(ctx, a.Ino); err != nil || rec.ETag != "e2" || rec.Size != 25 || rec.State != wire.HsmReleased || len(rec.BlockCRCs) != 0 {
		t.Fatalf("the refreshed file's record: %+v, %v", rec, err)
	}
	for name, state := range map[string]uint8{"b": wire.HsmReleased, "c": wire.HsmDirty} {
		if a, _ := s.GetAttr(ctx, ino(name)); a.Size != 10 {
			t.Fatalf("%s was changed: %+v", name, a)
		}
		// c's copy is gone: it must be archived again before a release.
		if rec, _ := s.HsmGet(ctx, ino(name)); rec.ETag != "e1" || rec.State != state {
			t.Fatalf("%s's record: %+v, want the old one in state %d", name, rec, state)
		}
	}
	_, err = s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: ino("c"), Action: wire.HsmActRelease})
	wantCode(t, "a release of the restored file whose object changed", err, errs.Busy)
	// Once b's restore gives up its lease, a re-run takes the new object;
	// then it is imported before.
	if _, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: ino("b"), Owner: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	if got := imp(true, changed...); got[0] != wire.ImportPresent || got[1] != wire.ImportUpdated || got[2] != wire.ImportChanged {
		t.Fatalf("the next re-run: %v, want imported before, updated, changed", got)
	}
	// A restore whose lease the refresh dropped cannot commit the old
	// object's bytes.
	if _, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: ino("a"), Owner: 3, LeaseMs: 1000}); err != nil {
		t.Fatal(err)
	}
	clock.Add(int64(2 * time.Second))
	if got := imp(true, entry("a", "e3", 30, 400)); got[0] != wire.ImportUpdated {
		t.Fatalf("a's lease ran out: %v, want updated", got)
	}
	_, err = s.HsmRestored(ctx, &wire.HsmClaimReq{Ino: ino("a"), Owner: 3})
	wantCode(t, "the commit of a restore of the object before the refresh", err, errs.Stale)
}

// TestForgetGone: the decision for a file whose object is gone from the
// bucket: only a released file that is still the import of that very
// object, not being restored and with one link goes; a restored one
// becomes dirty; anything else is kept or not touched.
func TestForgetGone(t *testing.T) {
	t.Parallel()
	rec := func(state uint8, etag string) wire.HsmRecord {
		return wire.HsmRecord{State: state, Backend: "b", Key: "k", Size: 20, Mtime: 100, ETag: etag}
	}
	want := rec(0, "e1")
	const now = 1000
	archive := rec(wire.HsmReleased, "")
	archive.Gen = 3
	otherKey := rec(wire.HsmReleased, "e1")
	otherKey.Key = "k2"
	otherBackend := rec(wire.HsmReleased, "e1")
	otherBackend.Backend = "c"
	for _, tc := range []struct {
		name   string
		cur    wire.HsmRecord
		lease  restoreLease
		nlink  uint32
		want   uint8
		remove bool
		dirty  bool
	}{
		{"released", rec(wire.HsmReleased, "e1"), restoreLease{}, 1, wire.ForgetRemoved, true, false},
		{"its restore's lease ran out", rec(wire.HsmReleased, "e1"), restoreLease{Owner: 7, Expires: now}, 1, wire.ForgetRemoved, true, false},
		{"being restored", rec(wire.HsmReleased, "e1"), restoreLease{Owner: 7, Expires: now + 1}, 1, wire.ForgetKept, false, false},
		{"another link", rec(wire.HsmReleased, "e1"), restoreLease{}, 2, wire.ForgetKept, false, false},
		{"restored (archived)", rec(wire.HsmArchived, "e1"), restoreLease{}, 1, wire.ForgetKept, false, true},
		{"restored and written (dirty)", rec(wire.HsmDirty, "e1"), restoreLease{}, 1, wire.ForgetKept, false, false},
		{"resident", wire.HsmRecord{}, restoreLease{}, 1, wire.ForgetOther, false, false},
		{"imported again since (another ETag)", rec(wire.HsmReleased, "e2"), restoreLease{}, 1, wire.ForgetOther, false, false},
		{"an archive, not an import", archive, restoreLease{}, 1, wire.ForgetOther, false, false},
		{"the import of another key", otherKey, restoreLease{}, 1, wire.ForgetOther, false, false},
		{"the import of another backend", otherBackend, restoreLease{}, 1, wire.ForgetOther, false, false},
	} {
		got, next, change, remove := forgetGone(tc.cur, tc.lease, want, tc.nlink, now)
		dirty := tc.cur
		dirty.State = wire.HsmDirty
		switch {
		case got != tc.want || remove != tc.remove || change != tc.dirty:
			t.Errorf("%s: %d, change %v, remove %v; want %d, %v, %v", tc.name, got, change, remove, tc.want, tc.dirty, tc.remove)
		case tc.dirty && !reflect.DeepEqual(next, dirty):
			t.Errorf("%s: next record %+v, want the file's made dirty", tc.name, next)
		}
	}
}

// TestTierForget: OpTierForget removes a released file an import made
// (its name, inode and record; the audit trail says who), makes a restored
// one dirty, and leaves alone one being restored, one imported again from
// a newer object, a file of its own and a name that is not there.
func TestTierForget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	addTestBackend(t, s)
	entry := func(name string) wire.TierImportEntry {
		return wire.TierImportEntry{Name: name, Key: "k/" + name, Size: 10, Mtime: 100, ETag: "e1"}
	}
	if _, err := s.TierImport(ctx, &wire.TierImportReq{Parent: RootIno, Backend: "b", Mode: 0o644,
		Entries: []wire.TierImportEntry{entry("a"), entry("b"), entry("c"), entry("d")}}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, RootIno, "mine")
	ino := func(name string) uint64 {
		a, err := s.Lookup(ctx, RootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	inoA := ino("a")
	// b is being restored; c was restored; d was imported again from a
	// newer object.
	if _, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: ino("b"), Owner: 1, LeaseMs: 60000}); err != nil {
		t.Fatal(err)
	}
	restoreIn(t, s, ino("c"), 2)
	d := entry("d")
	d.ETag = "e2"
	if r, err := s.TierImport(ctx, &wire.TierImportReq{Parent: RootIno, Backend: "b", Entries: []wire.TierImportEntry{d}, Refresh: true}); err != nil || r.Results[0] != wire.ImportUpdated {
		t.Fatalf("refresh of d: %v, %v", r.Results, err)
	}
	forget := func(name string) uint8 {
		t.Helper()
		r, err := s.TierForget(ctx, &wire.TierForgetReq{Parent: RootIno, Name: name, Backend: "b", Key: "k/" + name, Size: 10, Mtime: 100, ETag: "e1", Cred: wire.Cred{Uid: 42}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Result
	}
	for name, want := range map[string]uint8{"a": wire.ForgetRemoved, "b": wire.ForgetKept, "c": wire.ForgetKept, "d": wire.ForgetOther, "mine": wire.ForgetOther, "none": wire.ForgetOther} {
		if got := forget(name); got != want {
			t.Errorf("forget %s: %d, want %d", name, got, want)
		}
	}
	if _, err := s.Lookup(ctx, RootIno, "a"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("a after its removal: %v, want not found", err)
	}
	if _, err := s.GetAttr(ctx, inoA); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("a's inode after its removal: %v, want not found", err)
	}
	if rec, err := s.HsmGet(ctx, inoA); err == nil && rec.State != wire.HsmResident {
		t.Fatalf("a's record after its removal: %+v", rec)
	}
	for name, state := range map[string]uint8{"b": wire.HsmReleased, "c": wire.HsmDirty, "d": wire.HsmReleased} {
		if rec, err := s.HsmGet(ctx, ino(name)); err != nil || rec.State != state {
			t.Fatalf("%s's record: %+v, %v; want state %d", name, rec, err, state)
		}
	}
	if _, err := s.TierForget(ctx, &wire.TierForgetReq{Parent: RootIno, Name: "bad/name", Backend: "b"}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("forget of an invalid name: %v, want invalid", err)
	}
	_, entries := listAudit(t, s, wire.AuditListReq{})
	found := false
	for _, e := range entries {
		if e.Op == audit.OpUnlink && e.Ino == inoA && e.Name == "a" && e.Who.Uid == 42 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit entry names the removal of a by uid 42: %+v", entries)
	}
}

// TestTierImportOwn: a file an import made that is not the import of an
// object any more (here restored, then its record removed) is a file of
// its own to a re-run (ImportOwn, kept), where another file of the same
// name is one that exists (ImportExists).
func TestTierImportOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	addTestBackend(t, s)
	entry := func(name string) wire.TierImportEntry {
		return wire.TierImportEntry{Name: name, Key: "k/" + name, Size: 10, Mtime: 100, ETag: "e1"}
	}
	imp := func(es ...wire.TierImportEntry) []uint8 {
		t.Helper()
		r, err := s.TierImport(ctx, &wire.TierImportReq{Parent: RootIno, Backend: "b", Mode: 0o644, Entries: es, Refresh: true})
		if err != nil {
			t.Fatal(err)
		}
		return r.Results
	}
	imp(entry("a"))
	mustCreate(t, s, RootIno, "mine")
	a, err := s.Lookup(ctx, RootIno, "a")
	if err != nil {
		t.Fatal(err)
	}
	restoreIn(t, s, a.Ino, 1)
	if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: a.Ino, Action: wire.HsmActRemove}); err != nil {
		t.Fatal(err)
	}
	if got := imp(entry("a"), entry("mine")); got[0] != wire.ImportOwn || got[1] != wire.ImportExists {
		t.Fatalf("re-run: %v, want own (a), exists (mine)", got)
	}
	if rec, err := s.HsmGet(ctx, a.Ino); err != nil || rec.State != wire.HsmResident {
		t.Fatalf("a after the re-run: %+v, %v; want it left resident", rec, err)
	}
}

// restoreIn runs a restore of released file ino to its end in service s,
// as client owner would (lease claimed, restore committed).
func restoreIn(t *testing.T, s *Service, ino, owner uint64) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: ino, Owner: owner, LeaseMs: 60000}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HsmRestored(ctx, &wire.HsmClaimReq{Ino: ino, Owner: owner}); err != nil {
		t.Fatal(err)
	}
}

// TestTierImportDry: OpTierImportDry answers, entry for entry, what
// OpTierImport answers to the same request right after it (new names,
// files imported before of the same and of changed objects, a restored
// one, a file of its own, another file, invalid entries), and changes
// not one key of the metadata.
func TestTierImportDry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	addTestBackend(t, s)
	entry := func(name, etag string) wire.TierImportEntry {
		return wire.TierImportEntry{Name: name, Key: "k/" + name, Size: 10, Mtime: 100, ETag: etag}
	}
	req := func(es ...wire.TierImportEntry) *wire.TierImportReq {
		return &wire.TierImportReq{Parent: RootIno, Backend: "b", Mode: 0o644, Entries: es, Refresh: true}
	}
	if _, err := s.TierImport(ctx, req(entry("same", "e1"), entry("changed", "e1"), entry("restored", "e1"), entry("own", "e1"))); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"restored", "own"} {
		a, err := s.Lookup(ctx, RootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		restoreIn(t, s, a.Ino, 1)
		if name == "own" {
			if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: a.Ino, Action: wire.HsmActRemove}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustCreate(t, s, RootIno, "other")
	r := req(entry("same", "e1"), entry("changed", "e2"), entry("restored", "e2"), entry("own", "e1"),
		entry("other", "e1"), entry("new", "e1"), wire.TierImportEntry{Name: "bad/name", Key: "k/x", Size: 1, ETag: "e"})
	dump := func() map[string]string {
		m := map[string]string{}
		if err := s.db.View(ctx, func(tx kv.Txn) error {
			return tx.Scan(nil, nil, 0, func(k, v []byte) bool {
				m[string(k)] = string(v)
				return true
			})
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := dump()
	dry, err := s.TierImportDry(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if after := dump(); !reflect.DeepEqual(before, after) {
		t.Fatalf("the dry run changed the metadata (%d keys before, %d after)", len(before), len(after))
	}
	done, err := s.TierImport(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dry.Results, done.Results) || !reflect.DeepEqual(dry.Errors, done.Errors) {
		t.Fatalf("dry run %v %q, the import %v %q", dry.Results, dry.Errors, done.Results, done.Errors)
	}
	want := []uint8{wire.ImportPresent, wire.ImportUpdated, wire.ImportChanged, wire.ImportOwn, wire.ImportExists, wire.ImportMade, wire.ImportInvalid}
	if !reflect.DeepEqual(done.Results, want) {
		t.Fatalf("results %v, want %v", done.Results, want)
	}
}
