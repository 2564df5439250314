package chunk

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The benchmarks write and read 1 MiB at a time, sequentially, through the
// Store and through a plain os.File in the same directory, so that the
// Store's overhead (checksums, sidecar, locking) can be quoted as a ratio.
// Writes go to a new chunk (file) every 64 MiB, and the one before the
// previous is removed, to keep the disk footprint bounded.

const (
	benchIO       = 1 << 20
	benchPerChunk = 64
)

func BenchmarkWrite(b *testing.B) {
	p := pattern(1, benchIO)
	for _, mode := range []string{"nosync", "syncatend"} {
		b.Run("store/"+mode, func(b *testing.B) {
			s := openStore(b, b.TempDir())
			b.SetBytes(benchIO)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c := uint64(i / benchPerChunk)
				id := ID{Ino: c}
				if err := s.WriteAt(id, int64(i%benchPerChunk)*benchIO, p, false); err != nil {
					b.Fatal(err)
				}
				i++
				if i%benchPerChunk == 0 {
					if mode == "syncatend" {
						if err := s.Sync(id); err != nil {
							b.Fatal(err)
						}
					}
					if c >= 1 {
						s.Remove(c-1, []uint32{0})
					}
				}
			}
			if mode == "syncatend" {
				if err := s.Sync(ID{Ino: uint64(i / benchPerChunk)}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("osfile/"+mode, func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(benchIO)
			b.ReportAllocs()
			var f *os.File
			i := 0
			for b.Loop() {
				c := i / benchPerChunk
				if i%benchPerChunk == 0 {
					var err error
					if f, err = os.OpenFile(filepath.Join(dir, strconv.Itoa(c)), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := f.WriteAt(p, int64(i%benchPerChunk)*benchIO); err != nil {
					b.Fatal(err)
				}
				i++
				if i%benchPerChunk == 0 {
					if mode == "syncatend" {
						if err := f.Sync(); err != nil {
							b.Fatal(err)
						}
					}
					f.Close()
					f = nil
					if c >= 1 {
						os.Remove(filepath.Join(dir, strconv.Itoa(c-1)))
					}
				}
			}
			if f != nil {
				if mode == "syncatend" {
					f.Sync()
				}
				f.Close()
			}
		})
	}
}

// BenchmarkOverwrite rewrites the same 64 MiB in place (1 MiB at a time):
// the Store's undo record makes this its slowest write path.
func BenchmarkOverwrite(b *testing.B) {
	p := pattern(1, benchIO)
	b.Run("store", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		for i := range benchPerChunk {
			if err := s.WriteAt(ID{}, int64(i)*benchIO, p, false); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(benchIO)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := s.WriteAt(ID{}, int64(i%benchPerChunk)*benchIO, p, false); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("osfile", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "f"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for i := range benchPerChunk {
			f.WriteAt(p, int64(i)*benchIO)
		}
		b.SetBytes(benchIO)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := f.WriteAt(p, int64(i%benchPerChunk)*benchIO); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkRead(b *testing.B) {
	p := pattern(1, benchIO)
	buf := make([]byte, benchIO)
	b.Run("store", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		for i := range benchPerChunk {
			if err := s.WriteAt(ID{}, int64(i)*benchIO, p, false); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(benchIO)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			n, _, err := s.ReadAt(ID{}, int64(i%benchPerChunk)*benchIO, buf)
			if err != nil || n != benchIO {
				b.Fatal(n, err)
			}
			i++
		}
	})
	b.Run("osfile", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "f"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for i := range benchPerChunk {
			f.WriteAt(p, int64(i)*benchIO)
		}
		b.SetBytes(benchIO)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if n, err := f.ReadAt(buf, int64(i%benchPerChunk)*benchIO); err != nil || n != benchIO {
				b.Fatal(n, err)
			}
			i++
		}
	})
}

// BenchmarkRemove removes chunks of 64 KiB written and synced earlier,
// whose handles left the cache (the store was reopened), as the garbage
// collector removes a deleted file's chunks, beside the plain-file
// equivalent in the same run: removing two files and syncing their
// directory.
func BenchmarkRemove(b *testing.B) {
	p := pattern(2, 64<<10)
	b.Run("store", func(b *testing.B) {
		dir := b.TempDir()
		s := openStore(b, dir)
		for i := range b.N {
			mustWrite(b, s, ID{Ino: uint64(i)}, 0, p, true)
		}
		s.Close()
		s = openStore(b, dir)
		b.ResetTimer()
		for i := range b.N {
			if err := s.Remove(uint64(i), []uint32{0}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("osfile", func(b *testing.B) {
		dir := b.TempDir()
		for i := range b.N {
			if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)+".dat"), p, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)+".sum"), p[:64], 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for i := range b.N {
			for _, ext := range []string{".dat", ".sum"} {
				if err := os.Remove(filepath.Join(dir, strconv.Itoa(i)+ext)); err != nil {
					b.Fatal(err)
				}
			}
			if err := syncDir(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
}
