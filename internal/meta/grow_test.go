package meta

import (
	"context"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestSetSizeGrow checks the size change of fallocate (wire.SetSizeGrow):
// it grows a shorter file and leaves a file already as long or longer as
// it is, size and mtime, where a plain SetSize would cut it without its
// chunks being cut (another client grew the file meanwhile).
func TestSetSizeGrow(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	a := mustCreate(t, s, RootIno, "f")
	if _, err := s.CommitWrite(ctx, a.Ino, 1000, 111); err != nil {
		t.Fatal(err)
	}
	grow := func(size uint64) wire.Attr {
		t.Helper()
		got, err := s.SetAttr(ctx, &wire.SetAttrReq{Ino: a.Ino, Valid: wire.SetSize | wire.SetSizeGrow, Size: size})
		if err != nil {
			t.Fatalf("grow to %d: %v", size, err)
		}
		return got
	}
	for _, size := range []uint64{10, 999, 1000} {
		if got := grow(size); got.Size != 1000 || got.Mtime != 111 {
			t.Fatalf("grow to %d: size %d mtime %d, want 1000 and 111 (unchanged)", size, got.Size, got.Mtime)
		}
	}
	if got := grow(5000); got.Size != 5000 || got.Mtime == 111 {
		t.Fatalf("grow to 5000: size %d mtime %d, want 5000 and a new mtime", got.Size, got.Mtime)
	}
	// Without the flag the same request cuts, as a truncate does.
	got, err := s.SetAttr(ctx, &wire.SetAttrReq{Ino: a.Ino, Valid: wire.SetSize, Size: 10})
	if err != nil || got.Size != 10 {
		t.Fatalf("plain SetSize to 10: size %d, %v", got.Size, err)
	}
}

// TestSetSizeIfAt checks the conditional size change of a truncate
// (wire.SetIfAt): applied while the file's mtime and size are what the
// client saw before cutting its chunks, refused with errs.Busy and
// nothing changed once another client's commit moved them.
func TestSetSizeIfAt(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	a := mustCreate(t, s, RootIno, "f")
	seen, err := s.CommitWrite(ctx, a.Ino, 1000, 111)
	if err != nil {
		t.Fatal(err)
	}
	// Another client commits a write between the cut and the size change.
	if _, err := s.CommitWrite(ctx, a.Ino, 600, 222); err != nil {
		t.Fatal(err)
	}
	req := &wire.SetAttrReq{Ino: a.Ino, Valid: wire.SetSize | wire.SetIfAt, Size: 100, AtMtime: seen.Mtime, AtSize: seen.Size}
	if _, err := s.SetAttr(ctx, req); errs.CodeOf(err) != errs.Busy {
		t.Fatalf("size change after another commit: %v, want busy", err)
	}
	now, err := s.GetAttr(ctx, a.Ino)
	if err != nil || now.Size != 1000 || now.Mtime != 222 {
		t.Fatalf("after the refused change: size %d mtime %d (%v), want 1000 and 222", now.Size, now.Mtime, err)
	}
	req.AtMtime, req.AtSize = now.Mtime, now.Size
	if got, err := s.SetAttr(ctx, req); err != nil || got.Size != 100 {
		t.Fatalf("size change as the cut found it: size %d, %v", got.Size, err)
	}
}
