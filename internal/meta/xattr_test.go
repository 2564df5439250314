package meta

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestUnlinkXattrs: removing the last link of a file removes its extended
// attributes, whether the inode records that it has some (inoXattrs), was
// made before such records existed (no inoFlagsKnown: the unlink looks),
// or never had any (the unlink skips the scan); a hard link keeps them
// alive. The inode flags stay out of the attributes clients see.
func TestUnlinkXattrs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := kv.NewMemory()
	defer db.Close()
	s := newTestService(t, db, nil)

	plain := mustCreateInline(t, s, RootIno, "plain")
	tagged := mustCreateInline(t, s, RootIno, "tagged")
	old := mustCreateInline(t, s, RootIno, "old")
	linked := mustCreateInline(t, s, RootIno, "linked")
	for _, a := range []wire.Attr{plain, tagged, old, linked} {
		if a.Flags&^wire.AttrChunks != 0 {
			t.Fatalf("create returned flags %#x: inode flags leak to clients", a.Flags)
		}
	}
	for _, ino := range []uint64{tagged.Ino, linked.Ino} {
		if err := s.SetXattr(ctx, &wire.XattrReq{Ino: ino, Name: "user.k", Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Link(ctx, linked.Ino, RootIno, "linked2"); err != nil {
		t.Fatal(err)
	}
	// "old": a record as written before inoFlagsKnown, with an xattr key
	// written beside it.
	if err := db.Update(ctx, func(tx kv.Txn) error {
		n, err := getInode(tx, old.Ino)
		if err != nil {
			return err
		}
		n.Flags &^= inoFlagsKnown | inoXattrs
		tx.Set(inodeKey(old.Ino), n.encode())
		tx.Set(xattrKey(old.Ino, "user.old"), []byte("x"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if a, err := s.GetAttr(ctx, tagged.Ino); err != nil || a.Flags&^wire.AttrChunks != 0 {
		t.Fatalf("getattr after setxattr: flags %#x, %v", a.Flags, err)
	}

	countXattrs := func() map[uint64]int {
		t.Helper()
		got := map[uint64]int{}
		if err := db.View(ctx, func(tx kv.Txn) error {
			p := []byte{pfxXattr}
			return tx.Scan(p, kv.PrefixEnd(p), 0, func(k, _ []byte) bool {
				got[binary.BigEndian.Uint64(k[1:9])]++
				return true
			})
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, name := range []string{"plain", "tagged", "old", "linked"} {
		if err := s.Unlink(ctx, RootIno, name); err != nil {
			t.Fatalf("unlink %s: %v", name, err)
		}
	}
	if got := countXattrs(); len(got) != 1 || got[linked.Ino] != 1 {
		t.Fatalf("xattr keys by inode after unlinks: %v, want only the hard-linked file's", got)
	}
	if v, err := s.GetXattr(ctx, linked.Ino, "user.k"); err != nil || string(v) != "v" {
		t.Fatalf("xattr of the remaining link: %q, %v", v, err)
	}
	if err := s.Unlink(ctx, RootIno, "linked2"); err != nil {
		t.Fatal(err)
	}
	if got := countXattrs(); len(got) != 0 {
		t.Fatalf("xattr keys left after the last unlink: %v", got)
	}
}
