package meta

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/wire"
)

// TestBigDirectory lists a directory of a million entries page by page:
// exact count, sorted, no duplicates, and bounded live heap while listing.
var bigDirN = 1_000_000

func TestBigDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: a million creates")
	}
	n := bigDirN
	if raceEnabled {
		n = 100_000 // the race detector makes creates ~10x slower
	}
	ctx := context.Background()
	s := newTestService(t, nil, nil)
	d := mustMkdir(t, s, RootIno, "big")
	// The engine's copy-on-write tree makes lots of short-lived garbage
	// beside a large live heap: collect less often while filling it.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range 32 { // enough to fill the engine's commit groups
		wg.Go(func() {
			req := wire.CreateReq{Parent: d.Ino, Mode: modeFifo | 0o644, Exclusive: true}
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				req.Name = fmt.Sprintf("entry-%07d", i)
				if _, err := s.Create(ctx, &req); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	t.Logf("%d creates in %v", n, time.Since(start))

	start = time.Now()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	count, pages, cursor, prev := 0, 0, "", ""
	for {
		r, err := s.ReadDir(ctx, &wire.ReadDirReq{Ino: d.Ino, Cursor: cursor, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Entries {
			if e.Name <= prev {
				t.Fatalf("entry %q after %q: not sorted or duplicated", e.Name, prev)
			}
			if i, err := strconv.Atoi(e.Name[len("entry-"):]); err != nil || i < 0 || i >= n || e.Mode != modeFifo {
				t.Fatalf("unexpected entry %+v", e)
			}
			prev = e.Name
			count++
		}
		pages++
		if pages%200 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		if r.EOF {
			break
		}
		if len(r.Entries) != 1000 {
			t.Fatalf("page %d has %d entries and is not the last", pages, len(r.Entries))
		}
		cursor = r.Cursor
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapAlloc)
	t.Logf("listed %d entries in %d pages in %v; live heap %d MiB before, at most +%d MiB during",
		count, pages, time.Since(start), base>>20, (int64(peak)-int64(base))>>20)
	if count != n {
		t.Fatalf("listed %d entries, want %d", count, n)
	}
	if grow := int64(peak) - int64(base); grow > 64<<20 {
		t.Fatalf("live heap grew by %d MiB while listing", grow>>20)
	}
	if a, _ := s.GetAttr(ctx, d.Ino); a.Nlink != 2 {
		t.Fatalf("nlink of the big directory %d", a.Nlink)
	}
}
