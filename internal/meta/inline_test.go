package meta

import (
	"bytes"
	"context"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

func writeInline(t *testing.T, s *Service, ino uint64, off uint64, data string) wire.WriteInlineResp {
	t.Helper()
	r, err := s.WriteInline(context.Background(), &wire.WriteInlineReq{Ino: ino, Off: off, Data: []byte(data), Mtime: 7})
	if err != nil {
		t.Fatalf("write inline %q at %d: %v", data, off, err)
	}
	return r
}

func readInline(t *testing.T, s *Service, ino, off uint64, n uint32) wire.ReadInlineResp {
	t.Helper()
	r, err := s.ReadInline(context.Background(), &wire.ReadInlineReq{Ino: ino, Off: off, Len: n})
	if err != nil {
		t.Fatalf("read inline %d at %d: %v", n, off, err)
	}
	return r
}

// TestInline: a new file keeps its bytes in the metadata, writes are
// read-modify-writes with holes as zeros, the limit holds, SetChunks
// freezes the inline part, truncates cut it, and the last unlink frees it
// without queueing chunk removals.
func TestInline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	f := mustCreateInline(t, s, RootIno, "f")
	if f.Flags != 0 || f.InlineLen != 0 {
		t.Fatalf("new file: flags %d, inline length %d, want 0, 0", f.Flags, f.InlineLen)
	}
	r := writeInline(t, s, f.Ino, 0, "hello")
	if r.Written != 5 || r.Attr.Size != 5 || r.Attr.InlineLen != 5 || r.Attr.Mtime != 7 {
		t.Fatalf("write: %+v", r)
	}
	r = writeInline(t, s, f.Ino, 8, "xy") // a hole at 5..8
	if r.Written != 2 || r.Attr.Size != 10 || r.Attr.InlineLen != 10 {
		t.Fatalf("write past the end: %+v", r)
	}
	writeInline(t, s, f.Ino, 1, "EL")
	if got := readInline(t, s, f.Ino, 0, 100); string(got.Data) != "hELlo\x00\x00\x00xy" || got.Attr.Flags != 0 {
		t.Fatalf("read: %q flags %d", got.Data, got.Attr.Flags)
	}
	if got := readInline(t, s, f.Ino, 3, 3); string(got.Data) != "lo\x00" {
		t.Fatalf("read 3 at 3: %q", got.Data)
	}
	if got := readInline(t, s, f.Ino, 20, 3); len(got.Data) != 0 {
		t.Fatalf("read past the inline bytes: %q", got.Data)
	}
	_, err := s.WriteInline(ctx, &wire.WriteInlineReq{Ino: f.Ino, Off: DefaultInlineMax - 1, Data: []byte("ab")})
	wantCode(t, "write past InlineMax", err, errs.TooBig)

	// The size grows past the inline bytes with a truncate: a hole.
	if _, err := s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetSize, Size: 100}); err != nil {
		t.Fatal(err)
	}
	a, err := s.SetChunks(ctx, f.Ino)
	if err != nil || a.Flags != wire.AttrChunks || a.InlineLen != 10 || a.Size != 100 {
		t.Fatalf("setchunks: %+v, %v", a, err)
	}
	if a2, err := s.SetChunks(ctx, f.Ino); err != nil || a2.Flags != a.Flags || a2.InlineLen != a.InlineLen || a2.Ctime != a.Ctime {
		t.Fatalf("setchunks again: %+v, %v; want %+v", a2, err, a)
	}
	// Frozen: only the part below the inline length goes inline.
	if r := writeInline(t, s, f.Ino, 8, "XYZW"); r.Written != 2 || r.Attr.InlineLen != 10 || r.Attr.Size != 100 {
		t.Fatalf("write across the frozen end: %+v", r)
	}
	if r := writeInline(t, s, f.Ino, 10, "nope"); r.Written != 0 || r.Attr.InlineLen != 10 {
		t.Fatalf("write past the frozen end: %+v", r)
	}
	if got := readInline(t, s, f.Ino, 6, 100); string(got.Data) != "\x00\x00XY" || got.Attr.Flags != wire.AttrChunks {
		t.Fatalf("read across the frozen end: %q, %+v", got.Data, got.Attr)
	}
	// A truncate moves the end down, never up.
	if a, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetSize, Size: 3}); err != nil || a.InlineLen != 3 {
		t.Fatalf("truncate to 3: %+v, %v", a, err)
	}
	if a, err = s.SetAttr(ctx, &wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetSize, Size: 50}); err != nil || a.InlineLen != 3 {
		t.Fatalf("truncate to 50: %+v, %v", a, err)
	}
	if r := writeInline(t, s, f.Ino, 2, "QQ"); r.Written != 1 {
		t.Fatalf("write across the lowered end: %+v", r)
	}
	if got := readInline(t, s, f.Ino, 0, 100); string(got.Data) != "hEQ" {
		t.Fatalf("after truncates: %q", got.Data)
	}

	// Freeing a file without chunks frees its inline bytes, nothing else.
	g := mustCreateInline(t, s, RootIno, "g")
	writeInline(t, s, g.Ino, 0, "data")
	if err := s.Unlink(ctx, RootIno, "g"); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.PendingGarbage(ctx); n != 0 {
		t.Fatalf("%d files queued for chunk removal after freeing a file without chunks", n)
	}
	if err := s.db.View(ctx, func(tx kv.Txn) error {
		_, err := tx.Get(inlineKey(g.Ino))
		return err
	}); err != kv.ErrNotFound {
		t.Fatalf("inline bytes of a freed file: %v, want ErrNotFound", err)
	}
	// A file with chunks and inline bytes frees both.
	if err := s.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.PendingGarbage(ctx); n != 1 {
		t.Fatalf("%d files queued for chunk removal, want 1", n)
	}

	// ResolveRead returns the attributes with the inline bytes.
	h := mustCreateInline(t, s, RootIno, "h")
	writeInline(t, s, h.Ino, 0, "small file")
	if r, err := s.ResolveRead(ctx, "/h", true, ""); err != nil || string(r.Data) != "small file" || r.Attr.Ino != h.Ino || r.Attr.Size != 10 || r.HasXattr {
		t.Fatalf("resolveread: %q %+v, %v", r.Data, r.Attr, err)
	}
	if r, err := s.ResolveRead(ctx, "/h", true, "user.m"); err != nil || r.HasXattr || r.Xattr != nil {
		t.Fatalf("resolveread with a missing xattr: %+v, %v", r, err)
	}
	if err := s.SetXattr(ctx, &wire.XattrReq{Ino: h.Ino, Name: "user.m", Value: []byte("meta")}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.ResolveRead(ctx, "/h", true, "user.m"); err != nil || !r.HasXattr || string(r.Xattr) != "meta" || string(r.Data) != "small file" {
		t.Fatalf("resolveread with an xattr: %+v, %v", r, err)
	}
	if r, err := s.ResolveRead(ctx, "/", true, ""); err != nil || r.Data != nil || r.Attr.Ino != RootIno {
		t.Fatalf("resolveread of the root: %q %+v, %v", r.Data, r.Attr, err)
	}
	_, err = s.ResolveRead(ctx, "/nope", true, "")
	wantCode(t, "resolveread of a missing file", err, errs.NotFound)

	// Only regular files have data.
	d := mustMkdir(t, s, RootIno, "d")
	_, err = s.WriteInline(ctx, &wire.WriteInlineReq{Ino: d.Ino, Data: []byte("x")})
	wantCode(t, "write inline to a directory", err, errs.IsDir)
	_, err = s.SetChunks(ctx, d.Ino)
	wantCode(t, "setchunks of a directory", err, errs.IsDir)
	_, err = s.ReadInline(ctx, &wire.ReadInlineReq{Ino: 1 << 40, Len: 1})
	wantCode(t, "read inline of a missing inode", err, errs.NotFound)
}

// TestInlineCorruption: inline bytes whose checksum fails read as a
// corruption, not as data.
func TestInlineCorruption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	f := mustCreateInline(t, s, RootIno, "f")
	writeInline(t, s, f.Ino, 0, "precious")
	if err := s.db.Update(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(inlineKey(f.Ino))
		if err != nil {
			return err
		}
		v = bytes.Clone(v)
		v[6] ^= 1
		tx.Set(inlineKey(f.Ino), v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, err := s.ReadInline(ctx, &wire.ReadInlineReq{Ino: f.Ino, Len: 100})
	wantCode(t, "read of corrupt inline bytes", err, errs.Corruption)
	_, err = s.WriteInline(ctx, &wire.WriteInlineReq{Ino: f.Ino, Off: 1, Data: []byte("x")})
	wantCode(t, "write into corrupt inline bytes", err, errs.Corruption)
}

// TestInodeRecordV1: records written before inline data (version 1) read
// as files with chunks and no inline bytes.
func TestInodeRecordV1(t *testing.T) {
	n := &inode{Mode: modeReg | 0o644, Nlink: 1, Size: 42, Flags: inoChunks}
	n.Layout.StripeSize, n.Layout.StripeCount = 1<<20, 1
	n.Layout.Chains = append(n.Layout.Chains, 3)
	v2 := n.encode()
	// Version 1: no flags and inline length.
	v1 := append([]byte{1}, v2[1:inodeFixedSize]...)
	v1 = append(v1, v2[inodeFixedSize+5:]...)
	got, err := decodeInode(9, v1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Flags != inoChunks || got.InlineLen != 0 || got.Size != 42 || len(got.Layout.Chains) != 1 {
		t.Fatalf("version-1 record decodes as %+v", got)
	}
	n.Flags, n.InlineLen = 0, 77
	got, err = decodeInode(9, n.encode())
	if err != nil || got.Flags != 0 || got.InlineLen != 77 {
		t.Fatalf("version-2 record decodes as %+v, %v", got, err)
	}
	if _, err := decodeInode(9, append([]byte{2}, v2[1:inodeFixedSize+2]...)); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("truncated version-2 record: %v, want a corruption", err)
	}
}

// TestFormatUpgrade: a database of format version 1 opens, its superblock
// is rewritten to version 2, and its files (version-1 inode records) keep
// their data in chunks: reads go to the chunks and removal frees them.
func TestFormatUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := kv.NewMemory()
	defer db.Close()
	ft := newFakeTargets(2)
	s := newTestService(t, db, ft)
	f := mustCreateInline(t, s, RootIno, "old")
	// Make it a version-1 database holding a version-1 file.
	if err := db.Update(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(keySuper)
		if err != nil {
			return err
		}
		sb, err := decodeSuperblock(v)
		if err != nil {
			return err
		}
		sb.Version = 1
		tx.Set(keySuper, sb.encode())
		n, err := getInode(tx, f.Ino)
		if err != nil {
			return err
		}
		n.Size = 5000
		v2 := n.encode()
		v1 := append([]byte{1}, v2[1:inodeFixedSize]...)
		tx.Set(inodeKey(f.Ino), append(v1, v2[inodeFixedSize+5:]...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := newTestService(t, db, ft)
	if err := db.View(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(keySuper)
		if err != nil {
			return err
		}
		sb, err := decodeSuperblock(v)
		if err == nil && sb.Version != FormatVersion {
			t.Errorf("superblock version %d after opening, want %d", sb.Version, FormatVersion)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	a, err := s2.GetAttr(ctx, f.Ino)
	if err != nil || a.Flags != wire.AttrChunks || a.InlineLen != 0 || a.Size != 5000 {
		t.Fatalf("version-1 file after the upgrade: %+v, %v", a, err)
	}
	if err := s2.Unlink(ctx, RootIno, "old"); err != nil {
		t.Fatal(err)
	}
	if n, _ := s2.PendingGarbage(ctx); n != 1 {
		t.Fatalf("%d files queued for chunk removal after removing a version-1 file, want 1", n)
	}
}

// TestWriteInlineAttr: an inline write and an attribute change in one
// transaction leave the bytes and then the mode, owner and times asked
// (the write's time overridden), audit the owner change, and say whether
// the file was unchanged before; a change other than mode, owner, group
// and times, a write that would not land whole, or another inode's
// change is refused and changes nothing.
func TestWriteInlineAttr(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	f := mustCreateInline(t, s, RootIno, "f")
	const mtime = 1_700_000_000_000_000_000
	req := &wire.WriteInlineAttrReq{
		Write: wire.WriteInlineReq{Ino: f.Ino, Data: []byte("tar member"), Mtime: 7, IfMtime: f.Mtime, IfSize: f.Size},
		Attr:  wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetMode | wire.SetUid | wire.SetGid | wire.SetMtime, Mode: 0o600, Uid: 42, Gid: 43, Mtime: mtime, Cred: &wire.Cred{Uid: 0}},
	}
	r, err := s.WriteInlineAttr(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Written != 10 || r.Attr.Size != 10 || r.Attr.Mode&0o7777 != 0o600 || r.Attr.Uid != 42 || r.Attr.Gid != 43 || r.Attr.Mtime != mtime || r.Attr.Flags&wire.AttrUnchanged == 0 {
		t.Fatalf("reply %+v: want 10 bytes, mode 0600, owner 42:43, mtime %d, unchanged", r, int64(mtime))
	}
	if got := readInline(t, s, f.Ino, 0, 100); string(got.Data) != "tar member" || got.Attr.Mtime != mtime || got.Attr.Uid != 42 {
		t.Fatalf("read back %q, attr %+v", got.Data, got.Attr)
	}
	checkOwnerAudited(t, s, f.Ino, "42")

	// The file changed since the If state: the reply says so.
	req.Write.Data = []byte("again")
	if r, err = s.WriteInlineAttr(ctx, req); err != nil || r.Attr.Flags&wire.AttrUnchanged != 0 {
		t.Fatalf("second write with the first one's If state: %+v, %v (want changed)", r, err)
	}

	before := readInline(t, s, f.Ino, 0, 100)
	refused := func(what string, req *wire.WriteInlineAttrReq, code errs.Code) {
		t.Helper()
		if _, err := s.WriteInlineAttr(ctx, req); errs.CodeOf(err) != code {
			t.Errorf("%s: %v, want code %d", what, err, code)
		}
		after := readInline(t, s, f.Ino, 0, 100)
		if !bytes.Equal(after.Data, before.Data) || after.Attr.Mode != before.Attr.Mode || after.Attr.Uid != before.Attr.Uid || after.Attr.Mtime != before.Attr.Mtime || after.Attr.Ctime != before.Attr.Ctime || after.Attr.Size != before.Attr.Size {
			t.Errorf("%s changed the file: %q %+v, was %q %+v", what, after.Data, after.Attr, before.Data, before.Attr)
		}
	}
	size := *req
	size.Attr.Valid |= wire.SetSize
	refused("with a size change", &size, errs.Invalid)
	now := *req
	now.Attr.Valid = wire.SetMtimeNow
	refused("with mtime now", &now, errs.Invalid)
	other := *req
	other.Attr.Ino = RootIno
	refused("naming another inode", &other, errs.Invalid)
	big := *req
	big.Write.Data = make([]byte, s.inlMax+1)
	refused("past the inline limit", &big, errs.TooBig)
	if _, err := s.SetChunks(ctx, f.Ino); err != nil {
		t.Fatal(err)
	}
	before = readInline(t, s, f.Ino, 0, 100)
	past := *req
	past.Write.Off = uint64(before.Attr.InlineLen)
	refused("past the inline part of a file with chunks", &past, errs.TooBig)
}

// TestCommitWriteAttr: a size commit and an attribute change of the same
// file in one transaction (OpCommitWriteAttr), as the mount closes a file
// whose data went to the targets after tar restored its times and owner.
func TestCommitWriteAttr(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	f := mustCreateInline(t, s, RootIno, "f")
	if _, err := s.SetChunks(ctx, f.Ino); err != nil {
		t.Fatal(err)
	}
	const mtime = 1_700_000_000_000_000_000
	req := &wire.CommitWriteAttrReq{
		Commit: wire.CommitWriteReq{Ino: f.Ino, End: 65536, Mtime: 7, IfMtime: f.Mtime, IfSize: f.Size},
		Attr:   wire.SetAttrReq{Ino: f.Ino, Valid: wire.SetMode | wire.SetUid | wire.SetGid | wire.SetAtime | wire.SetMtime, Mode: 0o640, Uid: 42, Gid: 43, Atime: mtime - 5, Mtime: mtime, Cred: &wire.Cred{Uid: 0}},
	}
	a, err := s.CommitWriteAttr(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != 65536 || a.Mode&0o7777 != 0o640 || a.Uid != 42 || a.Gid != 43 || a.Mtime != mtime || a.Atime != mtime-5 || a.Flags&wire.AttrUnchanged == 0 || a.Flags&wire.AttrChunks == 0 {
		t.Fatalf("reply %+v: want size 65536, mode 0640, owner 42:43, the restored times, unchanged, chunks", a)
	}
	if a.Ctime == 7 || a.Ctime == mtime {
		t.Errorf("ctime %d: want the service's clock at the change, not the write's or the restored mtime", a.Ctime)
	}
	got, err := s.GetAttr(ctx, f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != a.Size || got.Mode != a.Mode || got.Uid != 42 || got.Mtime != mtime || got.Ctime != a.Ctime {
		t.Fatalf("stored %+v, replied %+v", got, a)
	}
	checkOwnerAudited(t, s, f.Ino, "42")

	// A commit below the size keeps it; the file changed since the If
	// state, and the reply says so.
	req.Commit.End = 10
	if a, err = s.CommitWriteAttr(ctx, req); err != nil || a.Size != 65536 || a.Flags&wire.AttrUnchanged != 0 {
		t.Fatalf("second commit with the first one's If state: %+v, %v (want size 65536, changed)", a, err)
	}

	before, err := s.GetAttr(ctx, f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, req *wire.CommitWriteAttrReq, code errs.Code) {
		t.Helper()
		if _, err := s.CommitWriteAttr(ctx, req); errs.CodeOf(err) != code {
			t.Errorf("%s: %v, want code %d", what, err, code)
		}
		after, err := s.GetAttr(ctx, before.Ino)
		if err != nil {
			t.Fatal(err)
		}
		if after.Mode != before.Mode || after.Uid != before.Uid || after.Mtime != before.Mtime || after.Ctime != before.Ctime || after.Size != before.Size {
			t.Errorf("%s changed the file: %+v, was %+v", what, after, before)
		}
	}
	grow := *req
	grow.Commit.End = 1 << 20
	size := grow
	size.Attr.Valid |= wire.SetSize
	refused("with a size change", &size, errs.Invalid)
	now := grow
	now.Attr.Valid = wire.SetMtimeNow
	refused("with mtime now", &now, errs.Invalid)
	other := grow
	other.Attr.Ino = RootIno
	refused("naming another inode", &other, errs.Invalid)
	dir := grow
	dir.Commit.Ino, dir.Attr.Ino = RootIno, RootIno
	refused("of a directory", &dir, errs.IsDir)
}

// checkOwnerAudited fails t unless the audit trail has an entry changing
// inode ino's uid to uid.
func checkOwnerAudited(t *testing.T, s *Service, ino uint64, uid string) {
	t.Helper()
	_, entries := listAudit(t, s, wire.AuditListReq{})
	for _, e := range entries {
		for _, c := range e.Changes {
			if e.Ino == ino && c.Field == "uid" && c.New == uid {
				return
			}
		}
	}
	t.Errorf("no audit entry for inode %d's owner change to %s in %+v", ino, uid, entries)
}
