package meta

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

func testRecord(gen, size uint64, mtime int64) wire.HsmRecord {
	const bs = 1 << 20
	return wire.HsmRecord{Backend: "b", Key: "k", Gen: gen, Size: size, Mtime: mtime, SHA256: make([]byte, 32),
		BlockSize: bs, BlockCRCs: make([]uint32, (size+bs-1)/bs)}
}

func TestHsmStep(t *testing.T) {
	t.Parallel()
	file := hsmFile{Reg: true, Size: 3 << 20, Mtime: 7}
	rec := testRecord(9, file.Size, file.Mtime)
	with := func(r wire.HsmRecord, st uint8) wire.HsmRecord { r.State = st; return r }
	short := rec
	short.BlockCRCs = short.BlockCRCs[:2]
	none := wire.HsmRecord{}
	empty := hsmFile{Reg: true}
	imported := testRecord(0, file.Size, 5) // generation 0: sluice tier import
	tests := []struct {
		name      string
		cur       wire.HsmRecord
		f         hsmFile
		act       uint8
		req       wire.HsmRecord
		wantState uint8
		wantDrop  uint64 // gen of the queued object, 0 for none
		wantErr   errs.Code
	}{
		{"archive resident", none, file, wire.HsmActArchived, rec, wire.HsmArchived, 0, errs.OK},
		{"archive dirty queues old copy", with(testRecord(3, 1, 1), wire.HsmDirty), file, wire.HsmActArchived, rec, wire.HsmArchived, 3, errs.OK},
		{"archive commit repeated", with(rec, wire.HsmArchived), file, wire.HsmActArchived, rec, wire.HsmArchived, 0, errs.OK},
		{"archive of a changed file", none, hsmFile{Reg: true, Size: 3 << 20, Mtime: 8}, wire.HsmActArchived, rec, 0, 0, errs.Busy},
		{"archive grown file", none, hsmFile{Reg: true, Size: 4 << 20, Mtime: 7}, wire.HsmActArchived, rec, 0, 0, errs.Busy},
		{"archive released", with(rec, wire.HsmReleased), file, wire.HsmActArchived, rec, 0, 0, errs.Busy},
		{"archive bad checksums", none, file, wire.HsmActArchived, short, 0, 0, errs.Invalid},
		{"archive no gen", none, file, wire.HsmActArchived, testRecord(0, file.Size, 7), 0, 0, errs.Invalid},
		{"archive directory", none, hsmFile{}, wire.HsmActArchived, rec, 0, 0, errs.Invalid},
		{"copy lost: archived becomes dirty", with(rec, wire.HsmArchived), file, wire.HsmActCopyLost, rec, wire.HsmDirty, 0, errs.OK},
		{"copy lost of another archive: nothing", with(rec, wire.HsmArchived), file, wire.HsmActCopyLost, testRecord(8, 1, 1), wire.HsmArchived, 0, errs.OK},
		{"copy lost of a released file", with(rec, wire.HsmReleased), file, wire.HsmActCopyLost, rec, 0, 0, errs.Busy},
		{"copy lost of a dirty file", with(rec, wire.HsmDirty), file, wire.HsmActCopyLost, rec, wire.HsmDirty, 0, errs.OK},
		{"release archived", with(rec, wire.HsmArchived), file, wire.HsmActRelease, none, wire.HsmReleased, 0, errs.OK},
		{"release again", with(rec, wire.HsmReleased), file, wire.HsmActRelease, none, wire.HsmReleased, 0, errs.OK},
		{"release resident", none, file, wire.HsmActRelease, none, 0, 0, errs.Invalid},
		{"release dirty", with(rec, wire.HsmDirty), file, wire.HsmActRelease, none, 0, 0, errs.Busy},
		{"release inline", with(rec, wire.HsmArchived), hsmFile{Reg: true, Size: 3 << 20, Mtime: 7, InlineLen: 10}, wire.HsmActRelease, none, 0, 0, errs.NotSupported},
		{"restored", with(rec, wire.HsmReleased), file, wire.HsmActRestored, rec, wire.HsmArchived, 0, errs.OK},
		{"restored twice", with(rec, wire.HsmArchived), file, wire.HsmActRestored, rec, wire.HsmArchived, 0, errs.OK},
		{"restored other gen", with(rec, wire.HsmReleased), file, wire.HsmActRestored, testRecord(4, 1, 1), 0, 0, errs.Stale},
		{"remove archived", with(rec, wire.HsmArchived), file, wire.HsmActRemove, none, wire.HsmResident, 9, errs.OK},
		{"remove dirty", with(rec, wire.HsmDirty), file, wire.HsmActRemove, none, wire.HsmResident, 9, errs.OK},
		{"remove released", with(rec, wire.HsmReleased), file, wire.HsmActRemove, none, 0, 0, errs.Busy},
		{"remove resident", none, file, wire.HsmActRemove, none, wire.HsmResident, 0, errs.OK},
		{"import into an empty file", none, empty, wire.HsmActImport, imported, wire.HsmReleased, 0, errs.OK},
		{"import into a file with data", none, file, wire.HsmActImport, imported, 0, 0, errs.Invalid},
		{"import into a file that had chunks", none, hsmFile{Reg: true, Chunks: true}, wire.HsmActImport, imported, 0, 0, errs.Invalid},
		{"import into a file with inline bytes", none, hsmFile{Reg: true, InlineLen: 1}, wire.HsmActImport, imported, 0, 0, errs.Invalid},
		{"import with a generation", none, empty, wire.HsmActImport, rec, 0, 0, errs.Invalid},
		{"import over a record", with(rec, wire.HsmArchived), empty, wire.HsmActImport, imported, 0, 0, errs.Exists},
		{"import bad checksums", none, empty, wire.HsmActImport, func() wire.HsmRecord { r := imported; r.BlockCRCs = r.BlockCRCs[:1]; return r }(), 0, 0, errs.Invalid},
		{"import of nothing", none, empty, wire.HsmActImport, testRecord(0, 0, 5), 0, 0, errs.Invalid},
		{"import into a directory", none, hsmFile{}, wire.HsmActImport, imported, 0, 0, errs.Invalid},
		{"imported object is never queued: archive again", with(imported, wire.HsmDirty), file, wire.HsmActArchived, rec, wire.HsmArchived, 0, errs.OK},
		{"imported object is never queued: remove", with(imported, wire.HsmArchived), file, wire.HsmActRemove, none, wire.HsmResident, 0, errs.OK},
		{"restored import", with(imported, wire.HsmReleased), file, wire.HsmActRestored, imported, wire.HsmArchived, 0, errs.OK},
		{"unknown action", none, file, 99, none, 0, 0, errs.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, drop, err := hsmStep(tt.cur, tt.f, &wire.HsmUpdateReq{Action: tt.act, Record: tt.req})
			if tt.wantErr != errs.OK {
				if errs.CodeOf(err) != tt.wantErr {
					t.Fatalf("err = %v, want class %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if next.State != tt.wantState {
				t.Errorf("state = %s, want %s", wire.HsmStateName(next.State), wire.HsmStateName(tt.wantState))
			}
			switch {
			case tt.wantDrop == 0 && drop != nil:
				t.Errorf("queued %+v, want nothing", *drop)
			case tt.wantDrop != 0 && (drop == nil || drop.Gen != tt.wantDrop):
				t.Errorf("queued %+v, want gen %d", drop, tt.wantDrop)
			}
		})
	}
}

func TestHsmOnWrite(t *testing.T) {
	t.Parallel()
	for st, want := range map[uint8]uint8{wire.HsmResident: wire.HsmResident, wire.HsmArchived: wire.HsmDirty, wire.HsmDirty: wire.HsmDirty} {
		next, err := hsmOnWrite(wire.HsmRecord{State: st})
		if err != nil || next.State != want {
			t.Errorf("%s: %s, %v; want %s", wire.HsmStateName(st), wire.HsmStateName(next.State), err, wire.HsmStateName(want))
		}
	}
	if _, err := hsmOnWrite(wire.HsmRecord{State: wire.HsmReleased}); errs.CodeOf(err) != errs.Busy {
		t.Errorf("write to released: %v, want busy", err)
	}
}

// TestHsmService drives the records through the service: a write marks an
// archived file dirty, a released file refuses writes and says so in its
// attributes, and removing the file queues its object once.
func TestHsmService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	if err := s.TierSet(ctx, &wire.TierSetReq{Backend: wire.TierBackend{Name: "b", Endpoint: "http://x", Bucket: "k"}}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "add twice", s.TierSet(ctx, &wire.TierSetReq{Backend: wire.TierBackend{Name: "b", Endpoint: "http://x", Bucket: "k"}}), errs.Exists)
	wantCode(t, "bad name", s.TierSet(ctx, &wire.TierSetReq{Backend: wire.TierBackend{Name: "a/b", Endpoint: "http://x", Bucket: "k"}}), errs.Invalid)
	f := mustCreate(t, s, RootIno, "f")
	a, err := s.CommitWrite(ctx, f.Ino, 3<<20, 7)
	if err != nil {
		t.Fatal(err)
	}
	archive := func(gen uint64, size uint64, mtime int64) error {
		_, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActArchived, Record: testRecord(gen, size, mtime)})
		return err
	}
	if err := archive(1, a.Size, a.Mtime); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CommitWrite(ctx, f.Ino, 10, 8); err != nil {
		t.Fatal(err)
	}
	if r, err := s.HsmGet(ctx, f.Ino); err != nil || r.State != wire.HsmDirty {
		t.Fatalf("after a write: %s, %v; want dirty", wire.HsmStateName(r.State), err)
	}
	if err := archive(2, a.Size, 8); err != nil {
		t.Fatal(err)
	}
	releaseFile(t, s, f.Ino)
	if a, err := s.GetAttr(ctx, f.Ino); err != nil || a.Flags&wire.AttrReleased == 0 || a.Size != 3<<20 {
		t.Fatalf("released attributes: %+v, %v", a, err)
	}
	restoring := func() error {
		_, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActRestoring, Record: wire.HsmRecord{Gen: 2}})
		return err
	}
	// The release queued the chunks' removal; a restore waits for it.
	wantCode(t, "restore before the collection", restoring(), errs.Busy)
	if err := s.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if err := restoring(); err != nil {
		t.Fatalf("restore after the collection: %v", err)
	}
	_, err = s.CommitWrite(ctx, f.Ino, 10, 9)
	wantCode(t, "write to released", err, errs.Busy)
	// A cut needs the bytes below the new size (a cut to 0 does not:
	// TestHsmOnTruncate, TestTruncateReleasedToZero in test/tier).
	_, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetSize, Size: 1 << 20})
	wantCode(t, "truncate released", err, errs.Busy)
	wantCode(t, "remove a backend in use", s.TierSet(ctx, &wire.TierSetReq{Backend: wire.TierBackend{Name: "b"}, Remove: true}), errs.Busy)
	if err := s.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	q, err := s.TierQueue(ctx, &wire.TierQueueReq{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	// Generation 1's copy was queued when 2 replaced it; 2's with the file.
	if len(q.Items) != 2 || q.Items[0].Gen != 1 || q.Items[1].Gen != 2 || q.Items[1].Ino != f.Ino || q.Items[1].Key != "k" || q.Items[1].Backend != "b" {
		t.Fatalf("queue = %+v", q.Items)
	}
	q, err = s.TierQueue(ctx, &wire.TierQueueReq{Done: q.Items, Limit: 10})
	if err != nil || len(q.Items) != 0 {
		t.Fatalf("queue after done = %+v, %v", q.Items, err)
	}
	if err := s.TierSet(ctx, &wire.TierSetReq{Backend: wire.TierBackend{Name: "b"}, Remove: true}); err != nil {
		t.Fatalf("remove an unused backend: %v", err)
	}
}

// TestHsmFlag: the "H" key is read only for inodes that may have one: an
// archive sets inoHsm, and an inode record from before inoFlagsKnown (no
// flags) is still checked, so a write marks it dirty and its removal
// queues its object.
func TestHsmFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := kv.NewMemory()
	defer db.Close()
	s := newTestService(t, db, nil)
	addTestBackend(t, s)
	flags := func(ino uint64) uint8 {
		t.Helper()
		var f uint8
		if err := db.View(ctx, func(tx kv.Txn) error {
			n, err := getInode(tx, ino)
			f = n.Flags
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, old := range []bool{false, true} {
		name := map[bool]string{false: "new", true: "old"}[old]
		f := mustCreate(t, s, RootIno, name)
		if flags(f.Ino)&inoHsm != 0 {
			t.Fatalf("%s: a new file has inoHsm", name)
		}
		a, err := s.CommitWrite(ctx, f.Ino, 3<<20, 7)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActArchived, Record: testRecord(5, a.Size, a.Mtime)}); err != nil {
			t.Fatal(err)
		}
		if flags(f.Ino)&inoHsm == 0 {
			t.Fatalf("%s: archived file without inoHsm", name)
		}
		if old {
			if err := db.Update(ctx, func(tx kv.Txn) error {
				n, err := getInode(tx, f.Ino)
				if err != nil {
					return err
				}
				n.Flags &= inoChunks // a record written before inoFlagsKnown
				tx.Set(inodeKey(f.Ino), n.encode())
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.CommitWrite(ctx, f.Ino, 10, 8); err != nil {
			t.Fatal(err)
		}
		if r, err := s.HsmGet(ctx, f.Ino); err != nil || r.State != wire.HsmDirty {
			t.Fatalf("%s: after a write: %s, %v; want dirty", name, wire.HsmStateName(r.State), err)
		}
		if err := s.Unlink(ctx, RootIno, name); err != nil {
			t.Fatal(err)
		}
		q, err := s.TierQueue(ctx, &wire.TierQueueReq{Limit: 10})
		if err != nil || len(q.Items) != 1 || q.Items[0].Ino != f.Ino {
			t.Fatalf("%s: queue after unlink = %+v, %v; want the file's object", name, q.Items, err)
		}
		if _, err := s.TierQueue(ctx, &wire.TierQueueReq{Done: q.Items, Limit: 10}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHsmImport: an import makes an empty file released with the
// object's size and time; writes are refused until a restore; its removal
// queues nothing (Sluice never deletes an object it did not write).
func TestHsmImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	addTestBackend(t, s)
	f := mustCreateInline(t, s, RootIno, "f")
	rec := testRecord(0, 5<<20+1, 1234)
	imp := func(ino uint64, r wire.HsmRecord) error {
		_, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: ino, Action: wire.HsmActImport, Record: r})
		return err
	}
	noBackend := rec
	noBackend.Backend = "nope"
	wantCode(t, "import to an unknown backend", imp(f.Ino, noBackend), errs.NotFound)
	if err := imp(f.Ino, rec); err != nil {
		t.Fatal(err)
	}
	a, err := s.GetAttr(ctx, f.Ino)
	if err != nil || a.Flags&wire.AttrReleased == 0 || a.Size != rec.Size || a.Mtime != 1234 {
		t.Fatalf("imported attributes: %+v, %v", a, err)
	}
	wantCode(t, "import twice", imp(f.Ino, rec), errs.Exists)
	_, err = s.CommitWrite(ctx, f.Ino, 10, 9)
	wantCode(t, "write to an imported released file", err, errs.Busy)
	g := mustCreate(t, s, RootIno, "g")
	if _, err := s.CommitWrite(ctx, g.Ino, 10, 9); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "import into a file with data", imp(g.Ino, rec), errs.Invalid)
	if err := s.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	if q, err := s.TierQueue(ctx, &wire.TierQueueReq{Limit: 10}); err != nil || len(q.Items) != 0 {
		t.Fatalf("removing an imported file queued %+v, %v; want nothing", q.Items, err)
	}
}

// listingRecord is the record of an object imported from a bucket's
// listing: an ETag, no SHA-256, no block checksums.
func listingRecord(size uint64) wire.HsmRecord {
	return wire.HsmRecord{Backend: "b", Key: "k", Size: size, Mtime: 5, BlockSize: 1 << 20, ETag: "0123abcd-3"}
}

func TestHsmStepListing(t *testing.T) {
	t.Parallel()
	empty := hsmFile{Reg: true}
	step := func(cur wire.HsmRecord, f hsmFile, act uint8, r wire.HsmRecord) (wire.HsmRecord, error) {
		next, _, err := hsmStep(cur, f, &wire.HsmUpdateReq{Action: act, Record: r})
		return next, err
	}
	rec := listingRecord(2<<20 + 1)
	next, err := step(wire.HsmRecord{}, empty, wire.HsmActImport, rec)
	if err != nil || next.State != wire.HsmReleased || next.ETag != rec.ETag || len(next.BlockCRCs) != 0 {
		t.Fatalf("import from a listing: %+v, %v", next, err)
	}
	noETag := rec
	noETag.ETag = ""
	_, err = step(wire.HsmRecord{}, empty, wire.HsmActImport, noETag)
	wantCode(t, "import without checksums or an ETag", err, errs.Invalid)
	some := rec
	some.BlockCRCs = []uint32{1}
	_, err = step(wire.HsmRecord{}, empty, wire.HsmActImport, some)
	wantCode(t, "import with an ETag and some block checksums", err, errs.Invalid)

	// The restore's commit keeps the block checksums it took, if there
	// is one per block; else the record stays without.
	file := hsmFile{Reg: true, Size: rec.Size, Mtime: 5}
	released := next
	next, err = step(released, file, wire.HsmActRestored, wire.HsmRecord{BlockCRCs: []uint32{7, 8, 9}})
	if err != nil || next.State != wire.HsmArchived || len(next.BlockCRCs) != 3 || next.BlockCRCs[2] != 9 || next.ETag != rec.ETag {
		t.Fatalf("restored with checksums: %+v, %v", next, err)
	}
	next, err = step(released, file, wire.HsmActRestored, wire.HsmRecord{BlockCRCs: []uint32{7, 8}})
	if err != nil || next.State != wire.HsmArchived || len(next.BlockCRCs) != 0 {
		t.Fatalf("restored with too few checksums: %+v, %v; want archived without any", next, err)
	}
	// A record with checksums keeps its own.
	full := testRecord(0, rec.Size, 5)
	full.State = wire.HsmReleased
	full.BlockCRCs[0] = 42
	next, err = step(full, file, wire.HsmActRestored, wire.HsmRecord{BlockCRCs: []uint32{7, 8, 9}})
	if err != nil || next.BlockCRCs[0] != 42 {
		t.Fatalf("restored record with checksums: %+v, %v; want its own kept", next, err)
	}
}

// TestHsmImportListing: a listing import's ETag survives the stored
// record with and without a restore lease, reaches the claim's answer,
// and the restore's commit stores the block checksums it sends.
func TestHsmImportListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	addTestBackend(t, s)
	f := mustCreateInline(t, s, RootIno, "f")
	rec := listingRecord(2<<20 + 1)
	if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActImport, Record: rec}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.HsmGet(ctx, f.Ino); err != nil || got.ETag != rec.ETag || got.State != wire.HsmReleased {
		t.Fatalf("record after import: %+v, %v", got, err)
	}
	const owner = 77
	cl, err := s.HsmClaim(ctx, &wire.HsmClaimReq{Ino: f.Ino, Owner: owner, LeaseMs: 60000, Full: true})
	if err != nil || cl.Owner != owner || cl.Full == nil || cl.Full.Record.ETag != rec.ETag {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	if got, err := s.HsmGet(ctx, f.Ino); err != nil || got.ETag != rec.ETag {
		t.Fatalf("record under a restore lease: %+v, %v", got, err)
	}
	got, err := s.HsmRestored(ctx, &wire.HsmClaimReq{Ino: f.Ino, Owner: owner, Sums: []uint32{1, 2, 3}})
	if err != nil || got.State != wire.HsmArchived {
		t.Fatalf("restored: %+v, %v", got, err)
	}
	if got, err := s.HsmGet(ctx, f.Ino); err != nil || got.ETag != rec.ETag || len(got.BlockCRCs) != 3 || got.BlockCRCs[1] != 2 {
		t.Fatalf("record after the restore: %+v, %v", got, err)
	}
}

// TestHsmStates checks the batch read of HSM states: each file's state as
// OpHsmGet gives it, in the order asked, HsmGone for a removed inode and a
// directory, and a request over the limit refused.
func TestHsmStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	if err := s.TierSet(ctx, &wire.TierSetReq{Backend: wire.TierBackend{Name: "b", Endpoint: "http://x", Bucket: "k"}}); err != nil {
		t.Fatal(err)
	}
	var inos []uint64
	var want []uint8
	add := func(name string, state uint8) {
		f := mustCreate(t, s, RootIno, name)
		a, err := s.CommitWrite(ctx, f.Ino, 3<<20, 7)
		if err != nil {
			t.Fatal(err)
		}
		if state != wire.HsmResident {
			if _, err := s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActArchived, Record: testRecord(1, a.Size, a.Mtime)}); err != nil {
				t.Fatal(err)
			}
		}
		switch state {
		case wire.HsmDirty:
			if _, err := s.CommitWrite(ctx, f.Ino, 10, 8); err != nil {
				t.Fatal(err)
			}
		case wire.HsmReleased:
			releaseFile(t, s, f.Ino)
		}
		inos, want = append(inos, f.Ino), append(want, state)
	}
	add("resident", wire.HsmResident)
	add("archived", wire.HsmArchived)
	add("dirty", wire.HsmDirty)
	add("released", wire.HsmReleased)
	gone := mustCreate(t, s, RootIno, "gone")
	if err := s.Unlink(ctx, RootIno, "gone"); err != nil {
		t.Fatal(err)
	}
	dir := mustMkdir(t, s, RootIno, "dir")
	inos, want = append(inos, gone.Ino, dir.Ino, inos[1]), append(want, wire.HsmGone, wire.HsmGone, wire.HsmArchived)
	got, err := s.HsmStates(ctx, inos)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("HsmStates = %v, %v; want %v", got, err, want)
	}
	for i, ino := range inos[:4] {
		if r, err := s.HsmGet(ctx, ino); err != nil || r.State != got[i] {
			t.Errorf("inode %d: HsmGet %d, %v; HsmStates %d", ino, r.State, err, got[i])
		}
	}
	_, err = s.HsmStates(ctx, make([]uint64, wire.MaxInos+1))
	wantCode(t, "too many inodes", err, errs.Invalid)
}

// TestTierRemoveRace checks a backend's removal against archives committed
// while it scans for the records that name the backend: an archive that
// comes after the removal started is refused (the backend is being
// removed), so the removal never leaves a record naming a backend that is
// gone; a removal refused because files name the backend lets archives
// to it through again; and a removal of a backend nobody names ends with
// neither the backend nor its mark.
func TestTierRemoveRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	add := func(name string) {
		t.Helper()
		if err := s.TierSet(ctx, &wire.TierSetReq{Backend: wire.TierBackend{Name: name, Endpoint: "http://x", Bucket: "k"}}); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(name string) error {
		return s.TierSet(ctx, &wire.TierSetReq{Backend: wire.TierBackend{Name: name}, Remove: true})
	}
	archive := func(name, backend string) error {
		f := mustCreate(t, s, RootIno, name)
		a, err := s.CommitWrite(ctx, f.Ino, 3<<20, 7)
		if err != nil {
			t.Fatal(err)
		}
		rec := testRecord(1, a.Size, a.Mtime)
		rec.Backend = backend
		_, err = s.HsmUpdate(ctx, &wire.HsmUpdateReq{Ino: f.Ino, Action: wire.HsmActArchived, Record: rec})
		return err
	}
	add("b")
	// An archive committed during the removal's scan.
	var during error
	s.tierRemoveHook = func() { during = archive("during", "b") }
	if err := remove("b"); err != nil {
		t.Fatalf("removal: %v (the archive during it: %v)", err, during)
	}
	s.tierRemoveHook = nil
	wantCode(t, "archive during the removal", during, errs.Busy)
	if l, err := s.TierList(ctx); err != nil || len(l.Backends) != 0 {
		t.Fatalf("backends after the removal: %+v, %v", l.Backends, err)
	}
	wantCode(t, "archive after the removal", archive("after", "b"), errs.NotFound)

	// A removal refused: archives go on.
	add("c")
	if err := archive("kept", "c"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "remove a backend in use", remove("c"), errs.Busy)
	if err := archive("again", "c"); err != nil {
		t.Fatalf("archive after a refused removal: %v", err)
	}
	// And an empty backend's removal leaves no mark.
	add("b")
	if err := remove("b"); err != nil {
		t.Fatal(err)
	}
	add("b")
	if err := archive("new", "b"); err != nil {
		t.Fatalf("archive to a backend added again: %v", err)
	}
}

// TestTouchAtime checks the relatime updates clients send for files they
// opened for reading: an access time older than a day becomes now, a
// recent one stays, ctime and mtime never change, directories and
// removed inodes are skipped, and a request over the limit is refused.
func TestTouchAtime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	old := time.Now().Add(-48 * time.Hour).UnixNano()
	stale := mustCreate(t, s, RootIno, "stale")
	fresh := mustCreate(t, s, RootIno, "fresh")
	dir := mustMkdir(t, s, RootIno, "dir")
	before := map[uint64]wire.Attr{}
	for _, ino := range []uint64{stale.Ino, dir.Ino} {
		a, err := s.SetAttr(ctx, &wire.SetAttrReq{Ino: ino, Valid: wire.SetAtime | wire.SetMtime, Atime: old, Mtime: old})
		if err != nil {
			t.Fatal(err)
		}
		before[ino] = a
	}
	fa, err := s.GetAttr(ctx, fresh.Ino)
	if err != nil {
		t.Fatal(err)
	}
	before[fresh.Ino] = fa
	gone := mustCreate(t, s, RootIno, "gone")
	if err := s.Unlink(ctx, RootIno, "gone"); err != nil {
		t.Fatal(err)
	}
	start := time.Now().UnixNano()
	if err := s.TouchAtime(ctx, []uint64{stale.Ino, fresh.Ino, dir.Ino, gone.Ino}); err != nil {
		t.Fatal(err)
	}
	for ino, b := range before {
		a, err := s.GetAttr(ctx, ino)
		if err != nil {
			t.Fatal(err)
		}
		if a.Ctime != b.Ctime || a.Mtime != b.Mtime {
			t.Errorf("inode %d: ctime %d -> %d, mtime %d -> %d; want both unchanged", ino, b.Ctime, a.Ctime, b.Mtime, a.Mtime)
		}
		switch touched := a.Atime >= start; {
		case ino == stale.Ino && !touched:
			t.Errorf("a day-old access time stayed %d", a.Atime)
		case ino != stale.Ino && a.Atime != b.Atime:
			t.Errorf("inode %d: access time %d -> %d; want unchanged", ino, b.Atime, a.Atime)
		}
	}
	wantCode(t, "too many inodes", s.TouchAtime(ctx, make([]uint64, wire.MaxInos+1)), errs.Invalid)
}
