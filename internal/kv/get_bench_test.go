package kv

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// BenchmarkGet measures point reads of the pebble engine with its read
// cache off: of keys that exist and of keys that do not (a create's
// lookup of the new name), among 100,000 directory-entry-like keys, part
// of them flushed to tables and part still in the memtable.
func BenchmarkGet(b *testing.B) {
	const keys = 100000
	db, err := OpenPebble(b.TempDir(), &PebbleOptions{ReadCacheEntries: -1, MemTableSize: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for i := 0; i < keys; i += 1000 {
		err := db.Update(ctx, func(tx Txn) error {
			for j := i; j < i+1000; j++ {
				tx.Set(fmt.Appendf(nil, "d/\x00\x00\x00\x00\x00\x00\x00\x07/file-%07d", j), make([]byte, 16))
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, present := range []bool{true, false} {
		b.Run(fmt.Sprintf("present=%v", present), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				name := "file"
				if !present {
					name = "new"
				}
				key := fmt.Appendf(nil, "d/\x00\x00\x00\x00\x00\x00\x00\x07/%s-%07d", name, i%keys)
				err := db.View(ctx, func(tx Txn) error {
					_, err := tx.Get(key)
					if found := err == nil; found != present {
						if found || errors.Is(err, ErrNotFound) {
							return fmt.Errorf("key %q: found %v", key, found)
						}
						return err
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
