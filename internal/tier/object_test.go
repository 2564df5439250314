package tier

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestSummerBlocks checks the block checksums against each block, however
// the content is cut into writes, and that a changed byte fails its block.
func TestSummerBlocks(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 4095, 4096, 4097, 3*4096 + 7} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		s := NewSummer(4096)
		for rest := data; len(rest) > 0; {
			k := min(len(rest), 1+r.IntN(5000))
			s.Write(rest[:k])
			rest = rest[k:]
		}
		rec := wire.HsmRecord{Key: "k", Backend: "b"}
		s.Fill(&rec)
		if rec.Size != uint64(size) || len(rec.BlockCRCs) != (size+4095)/4096 || len(rec.SHA256) != 32 {
			t.Fatalf("size %d: record %+v", size, rec)
		}
		for i := range rec.BlockCRCs {
			b := data[i*4096 : i*4096+int(BlockLen(&rec, i))]
			if err := CheckBlock(&rec, i, b); err != nil {
				t.Fatalf("size %d block %d: %v", size, i, err)
			}
			bad := bytes.Clone(b)
			bad[len(bad)/2] ^= 1
			if err := CheckBlock(&rec, i, bad); errs.CodeOf(err) != errs.Corruption {
				t.Fatalf("size %d block %d: changed byte gave %v", size, i, err)
			}
		}
	}
}

func TestObjectKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		p     string
		taken bool
		want  string
	}{
		{"/a/b", false, "a/b"}, {"a//b/", false, "a/b"}, {"/a/../c", false, "c"}, {"/a/b", true, "a/b.sluice-7"},
	} {
		if got := ObjectKey(tt.p, 7, tt.taken); got != tt.want {
			t.Errorf("ObjectKey(%q, %v) = %q, want %q", tt.p, tt.taken, got, tt.want)
		}
	}
}

// TestCheckObject: the metadata written with an archive passes; another
// generation's does not.
func TestCheckObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := NewMemStore()
	rec := wire.HsmRecord{Key: "k", Backend: "b", Gen: 5}
	s := NewSummer(BlockSize)
	s.Write([]byte("hello"))
	s.Fill(&rec)
	if err := m.Put(ctx, "k", bytes.NewReader([]byte("hello")), 5, ObjectMeta(&rec, 3)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	meta, err := m.GetRange(ctx, "k", 0, buf, "")
	if err != nil || CheckObject(&rec, meta) != nil || CheckBlock(&rec, 0, buf) != nil || MetaInode(meta) != 3 {
		t.Fatalf("get: %v / %v", err, CheckObject(&rec, meta))
	}
	other := rec
	other.Gen = 6
	if err := CheckObject(&other, meta); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("other generation: %v", err)
	}
}

// TestBlockSums: the block checksums taken piece by piece, in any order,
// are those a Summer takes of the whole object.
func TestBlockSums(t *testing.T) {
	t.Parallel()
	data := make([]byte, 3*BlockSize+17)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var want wire.HsmRecord
	s := NewSummer(BlockSize)
	s.Write(data)
	s.Fill(&want)
	rec := wire.HsmRecord{Size: uint64(len(data)), BlockSize: BlockSize}
	if Blocks(&rec) != 4 {
		t.Fatalf("Blocks = %d, want 4", Blocks(&rec))
	}
	sums := make([]uint32, Blocks(&rec))
	for _, off := range []int64{2 * BlockSize, 0} { // pieces of two blocks, last first
		end := min(off+2*BlockSize, int64(len(data)))
		BlockSums(&rec, off, data[off:end], sums)
	}
	for i := range sums {
		if sums[i] != want.BlockCRCs[i] {
			t.Fatalf("block %d: %08x, want %08x", i, sums[i], want.BlockCRCs[i])
		}
	}
}

// TestMemStoreETag: the listing gives each object's ETag, and a read
// pinned to another ETag fails as corruption.
func TestMemStoreETag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := NewMemStore()
	if err := m.Put(ctx, "k", bytes.NewReader([]byte("hello")), 5, nil); err != nil {
		t.Fatal(err)
	}
	var etag string
	m.List(ctx, "", func(o ObjectInfo) error { etag = o.ETag; return nil })
	if etag != "5d41402abc4b2a76b9719d911017c592" { // MD5 of "hello"
		t.Fatalf("listed ETag %q", etag)
	}
	buf := make([]byte, 5)
	if _, err := m.GetRange(ctx, "k", 0, buf, etag); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetRange(ctx, "k", 0, buf, "other"); errs.CodeOf(err) != errs.Corruption {
		t.Fatalf("read pinned to another ETag: %v", err)
	}
}

// TestCheckCopy: a release's check of the copy in the bucket accepts the
// object the record describes and refuses one of another size, another
// generation or SHA-256 (an archive), or another ETag (an imported
// object).
func TestCheckCopy(t *testing.T) {
	t.Parallel()
	arch := wire.HsmRecord{Key: "k", Backend: "b", Gen: 5, Size: 5}
	s := NewSummer(BlockSize)
	s.Write([]byte("hello"))
	s.Fill(&arch)
	meta := ObjectMeta(&arch, 3)
	imp := wire.HsmRecord{Key: "k", Backend: "b", Gen: ImportedGen, Size: 5, ETag: "e1"}
	impNoETag := imp
	impNoETag.ETag = ""
	other := ObjectMeta(&wire.HsmRecord{Gen: 6, SHA256: arch.SHA256}, 3)
	for _, tc := range []struct {
		name string
		rec  wire.HsmRecord
		info ObjectInfo
		meta map[string]string
		ok   bool
	}{
		{"archive, its object", arch, ObjectInfo{Size: 5, ETag: "x"}, meta, true},
		{"archive, another size", arch, ObjectInfo{Size: 6, ETag: "x"}, meta, false},
		{"archive, another generation", arch, ObjectInfo{Size: 5}, other, false},
		{"archive, an object Sluice did not write", arch, ObjectInfo{Size: 5}, nil, false},
		{"import, its object", imp, ObjectInfo{Size: 5, ETag: "e1"}, nil, true},
		{"import, another ETag", imp, ObjectInfo{Size: 5, ETag: "e2"}, nil, false},
		{"import, another size", imp, ObjectInfo{Size: 4, ETag: "e1"}, nil, false},
		{"import without an ETag, same size", impNoETag, ObjectInfo{Size: 5, ETag: "e2"}, nil, true},
	} {
		err := CheckCopy(&tc.rec, tc.info, tc.meta)
		if tc.ok != (err == nil) || (err != nil && errs.CodeOf(err) != errs.Corruption) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
