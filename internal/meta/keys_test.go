package meta

import (
	"bytes"
	"testing"

	"github.com/sluice-fs/sluice/internal/placement"
)

// FuzzDecodeInode feeds arbitrary bytes to the inode record decoder: it
// must not panic, and what it accepts must encode back to the same bytes.
func FuzzDecodeInode(f *testing.F) {
	f.Add((&inode{Mode: modeDir | 0o755, Nlink: 2, Parent: 1}).encode())
	f.Add((&inode{Mode: modeReg | 0o644, Nlink: 1, Size: 1 << 40, Layout: placement.Layout{StripeSize: 1 << 20, StripeCount: 2, Chains: []placement.ChainID{3, 9}}}).encode())
	f.Add((&inode{Mode: modeReg | 0o644, Nlink: 1, Size: 100, Flags: newInodeFlags | inoChunks, Cut: 3, CutAt: 1 << 60, Layout: placement.Layout{StripeSize: 1 << 20, StripeCount: 1, Chains: []placement.ChainID{3}}}).encode())
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeInode(7, b)
		if err != nil {
			return
		}
		if got := n.encode(); !bytes.Equal(got, b) {
			t.Fatalf("decode then encode: %x, want %x", got, b)
		}
	})
}

// FuzzDecodeValues covers the other stored records.
func FuzzDecodeValues(f *testing.F) {
	f.Add(dirent{ino: 5, mode: modeLink}.encode())
	f.Add(dirTimes{1, 2}.encode())
	f.Add(appendLayout(nil, &placement.Layout{StripeSize: 1 << 20, StripeCount: 1, Chains: []placement.ChainID{1}}))
	f.Add(appendLayout(nil, &placement.Layout{StripeSize: 1 << 20, StripeCount: 1, Chains: []placement.ChainID{1}, Data: 77}))
	f.Add(appendLayout(nil, &placement.Layout{StripeSize: 1 << 20, StripeCount: 1, Replicas: 2, Chains: []placement.ChainID{1 << 31}, Data: 1 << 40}))
	f.Add(appendLayout(nil, &placement.Layout{StripeSize: 1 << 20, StripeCount: 3, Chains: []placement.ChainID{1, 1, 2},
		Comps: []placement.Comp{{End: 64 << 20, StripeSize: 1 << 20, StripeCount: 1, Pool: "nvme"}, {StripeSize: 4 << 20, StripeCount: 2}}}))
	f.Add(appendLayout(nil, &placement.Layout{StripeSize: 1 << 20, StripeCount: 1, Data: 9,
		Comps: []placement.Comp{{End: 1 << 20, StripeSize: 1 << 20, StripeCount: 1}, {StripeSize: 1 << 20}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, err := decodeDirent(b); err == nil && !bytes.Equal(e.encode(), b) {
			t.Fatalf("dirent round trip of %x", b)
		}
		if d, err := decodeDirTimes(1, b); err == nil && !bytes.Equal(d.encode(), b) {
			t.Fatalf("times round trip of %x", b)
		}
		var l placement.Layout
		if err := decodeLayout(b, &l); err == nil && !bytes.Equal(appendLayout(nil, &l), b) {
			t.Fatalf("layout round trip of %x", b)
		}
		decodeSuperblock(b)
	})
}

func TestKeysOrder(t *testing.T) {
	t.Parallel()
	// Big-endian inode numbers: scans visit inodes in numeric order, and one
	// directory's entries are contiguous and sorted by name.
	if bytes.Compare(inodeKey(255), inodeKey(256)) >= 0 {
		t.Fatal("inode keys not ordered")
	}
	if bytes.Compare(direntKey(1, "zzz"), direntKey(2, "")) >= 0 {
		t.Fatal("entries of directory 1 do not sort before directory 2's")
	}
	if !bytes.HasPrefix(direntKey(7, "a"), direntPrefix(7)) || !bytes.HasPrefix(xattrKey(7, "a"), xattrPrefix(7)) {
		t.Fatal("prefixes")
	}
}
