package kv_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/kv/kvtest"
)

func openPebbleCache(t *testing.T, entries int) kv.DB {
	t.Helper()
	db, err := kv.OpenPebble(t.TempDir(), &kv.PebbleOptions{ReadCacheEntries: entries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestPebbleTinyReadCacheConformance runs the conformance suite with a read
// cache so small that every insert resets a shard.
func TestPebbleTinyReadCacheConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.DB { return openPebbleCache(t, 64) })
}

// TestPebbleReadCacheSnapshots has writers keep pairs of keys equal while
// readers check, in one View, that both keys of a pair agree (no mixed
// snapshots), and that every acknowledged write is seen by a later View.
// Every other value of the second key is larger than the cache keeps, so
// that kept and not-kept values of one key alternate.
func TestPebbleReadCacheSnapshots(t *testing.T) {
	for _, entries := range []int{64, 4096, -1} {
		t.Run(fmt.Sprint("entries=", entries), func(t *testing.T) {
			db := openPebbleCache(t, entries)
			ctx := context.Background()
			const pairs = 40
			key := func(p int, half string) []byte { return []byte(fmt.Sprintf("pair/%03d/%s", p, half)) }
			u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
			// big is v, padded past what the cache keeps when v is odd.
			big := func(v uint64) []byte {
				b := u64(v)
				if v%2 == 1 {
					b = append(b, make([]byte, 5<<10)...)
				}
				return b
			}
			var acked [pairs]atomic.Uint64 // highest value acknowledged per pair
			var stop atomic.Bool
			var wg sync.WaitGroup
			errc := make(chan error, 16)
			for w := range 4 {
				wg.Go(func() {
					for i := 0; i < 300; i++ {
						p := (w*131 + i*7) % pairs
						var next uint64
						err := db.Update(ctx, func(tx kv.Txn) error {
							v, err := tx.Get(key(p, "a"))
							cur := uint64(0)
							if err == nil {
								cur = binary.BigEndian.Uint64(v)
							} else if err != kv.ErrNotFound {
								return err
							}
							next = cur + 1
							tx.Set(key(p, "a"), u64(next))
							tx.Set(key(p, "b"), big(next))
							return nil
						})
						if err != nil {
							errc <- err
							return
						}
						for {
							old := acked[p].Load()
							if next <= old || acked[p].CompareAndSwap(old, next) {
								break
							}
						}
					}
				})
			}
			for range 3 {
				wg.Go(func() {
					for !stop.Load() {
						for p := range pairs {
							floor := acked[p].Load()
							err := db.View(ctx, func(tx kv.Txn) error {
								a, errA := tx.Get(key(p, "a"))
								b, errB := tx.Get(key(p, "b"))
								if (errA == nil) != (errB == nil) {
									return fmt.Errorf("pair %d: one key exists, the other not", p)
								}
								if errA != nil {
									if floor > 0 {
										return fmt.Errorf("pair %d: acknowledged value %d not visible", p, floor)
									}
									return nil
								}
								va, vb := binary.BigEndian.Uint64(a), binary.BigEndian.Uint64(b)
								if len(b) != len(big(vb)) {
									return fmt.Errorf("pair %d: value %d is %d bytes long", p, vb, len(b))
								}
								if va != vb {
									return fmt.Errorf("pair %d: mixed snapshot a=%d b=%d", p, va, vb)
								}
								if va < floor {
									return fmt.Errorf("pair %d: read %d after %d was acknowledged", p, va, floor)
								}
								return nil
							})
							if err != nil {
								errc <- err
								return
							}
						}
					}
				})
			}
			// Stop the readers once the writers are done.
			done := make(chan struct{})
			go func() {
				for {
					total := uint64(0)
					for p := range pairs {
						total += acked[p].Load()
					}
					if total >= 4*300 || len(errc) > 0 {
						break
					}
					time.Sleep(time.Millisecond)
				}
				stop.Store(true)
				close(done)
			}()
			<-done
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
		})
	}
}
