package meta

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
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
