package client

import (
	"context"
	"syscall"
	"time"
)

// The staging limit. A staging area is a bounded buffer: it holds at most
// a limit of bytes that were written to it and have not drained to the
// targets yet. A write that would pass the limit seals the File's open
// segment (so that it can drain) and waits until drains make room: a
// burst larger than the staging area slows its writers to the drain's
// rate instead of failing them with ENOSPC. Once half of the limit is
// held, a File's open segment is also sealed whenever it reaches
// stagingSegmentMax(limit) (sealEarly), so that the bytes in segments
// nobody has sealed yet (which cannot drain) stay a small part of the
// limit even with many writers; below half, a File's writes stay in one
// segment until its Sync or Close, as without a limit.

// stagingMinPiece is the least room a write waits for: a write that needs
// more takes what there is once this much is free, and waits for the rest.
const stagingMinPiece = 1 << 20

// stagingLimit decides a staging area's limit: opt when it is set
// (Options.StagingMax), else three quarters of what the staging file
// system had available at start (avail), less what a memory file
// system's pool of drained data files may hold (memTotal: its size, 0
// on a disk), so that the staged bytes, the pool and the records fit.
// 0 means no limit (the file system's space is not known).
func stagingLimit(opt, avail, memTotal int64) int64 {
	if opt > 0 {
		return opt
	}
	if avail <= 0 {
		return 0
	}
	if memTotal > 0 {
		avail -= min(poolMax, memTotal/4)
	}
	return max(avail/4*3, 1)
}

// effectiveLimit lowers a staging area's limit to what its file system
// can still take: the bytes held when its available space was read
// (avail; other programs may be filling it), plus three quarters of
// avail and of pool (drained data files kept for reuse, whose space new
// segments take back) at that time. Bytes staged since then use up the
// room; bytes drained since then count only at the next reading. Writers
// then wait for drains where the file system would have failed them with
// ENOSPC. A limit of 0 (none) stays; avail < 0 means unknown.
func effectiveLimit(limit, held, avail, pool int64) int64 {
	if limit <= 0 || avail < 0 {
		return limit
	}
	return max(min(limit, held+(avail+pool)/4*3), 1)
}

// stagingRefresh is how long a reading of the staging file system's
// available space is trusted.
const stagingRefresh = 20 * time.Millisecond

// stagingSegmentMax is the size at which a File's open segment is sealed
// under a limit's pressure: a 32nd of it, between 256 KiB and 64 MiB (0:
// never).
func stagingSegmentMax(limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	return min(max(limit/32, 256<<10), 64<<20)
}

// sealEarly decides whether a File's open segment of seg bytes is sealed
// after a write, with held bytes held under limit: when the segment
// reached stagingSegmentMax and at least half of the limit is held.
func sealEarly(limit, held, seg int64) bool {
	segMax := stagingSegmentMax(limit)
	return segMax > 0 && seg >= segMax && held >= limit/2
}

// stagingRoom decides how many of the want bytes a write may stage now,
// with held bytes staged and not drained (open segments included) under
// limit, sealed of them in sealed segments (those that drains will free).
// wait says it must wait for a drain first. A write takes all it wants
// when it fits, the free part when that is at least stagingMinPiece, and
// otherwise waits, unless nothing sealed is left to drain: waiting could
// then last until some other writer seals, so it goes over the limit, by
// one piece (stagingMinPiece) at most: its next piece finds the limit
// passed and seals its own segment to wait for that one's drain. (Before
// 2026-12-05 it took the whole rest of the write: most likely why a
// TestStagingFull run under load failed with ENOSPC on its 8 MiB staging
// file system after the 4.5 MiB of its limit.)
func stagingRoom(limit, held, sealed, want int64) (n int64, wait bool) {
	if limit <= 0 {
		return want, false
	}
	free := limit - held
	if free >= want {
		return want, false
	}
	if free >= stagingMinPiece {
		return free, false
	}
	if sealed <= 0 {
		return min(want, stagingMinPiece), false
	}
	return 0, true
}

// availableBytes returns the bytes available to this process on dir's
// file system (-1 if unknown).
func availableBytes(dir string) int64 {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
}

// limitNowLocked returns the limit in force: the area's, lowered by its
// file system's available space (effectiveLimit), read at most every
// stagingRefresh unless fresh is set. s.mu is held.
func (s *stager) limitNowLocked(fresh bool) int64 {
	if s.limit <= 0 {
		return s.limit
	}
	if now := time.Now(); fresh || now.Sub(s.spaceAt) > stagingRefresh {
		s.space, s.spaceAt = availableBytes(s.base), now
		s.spaceHeld, s.spacePool = s.held, s.poolBytes
	}
	return effectiveLimit(s.limit, s.spaceHeld, s.space, s.spacePool)
}

// reserve grants a write of want bytes its room in the staging area:
// it returns how many bytes it may stage now (counted as held at once, so
// that writers in parallel never share the same free bytes), sealing the
// File's open segment and waiting for drains while there is none.
// f.mu is held (sf is the File's). size is the File's size.
func (sf *stagedFile) reserve(ctx context.Context, want, size int64) (int64, error) {
	s := sf.s
	s.mu.Lock()
	// First as if everything held could drain: going over the limit is
	// decided only once the open segments that can be sealed are.
	n, wait := stagingRoom(s.limitNowLocked(false), s.held, s.held, want)
	if !wait {
		s.held += n
		s.noteHeldLocked()
		s.mu.Unlock()
		return n, nil
	}
	s.mu.Unlock()
	if sf.seg != nil {
		// What this File staged must be able to drain too.
		if err := sf.seal(ctx, size); err != nil {
			return 0, err
		}
	}
	s.sealIdle(ctx)
	start := time.Now()
	s.waiting.Add(1) // the drains stop yielding to writers
	defer s.waiting.Add(-1)
	defer s.wakeOnDone(ctx)()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Waiting++
	defer func() { s.stats.Waiting-- }() // before the unlock
	for {
		n, wait = stagingRoom(s.limitNowLocked(true), s.held, s.sealed, want)
		if !wait {
			break
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		s.cond.Wait()
	}
	s.held += n
	s.noteHeldLocked()
	s.stats.Throttled++
	s.stats.ThrottledTime += time.Since(start)
	return n, nil
}

// sealEarly reports whether a File's open segment of seg bytes is to be
// sealed now (the function sealEarly with the area's state).
func (s *stager) sealEarly(seg int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sealEarly(s.limitNowLocked(false), s.held, seg)
}

// sealIdle seals the open segments of Files not in use (their lock is
// free), so that drains can free their bytes: a File that wrote and then
// sits open would otherwise hold them until its Sync or Close. A File in
// use is left alone: it writes (and then seals under pressure, or waits
// for room, which seals) or reads (which seals before waiting for its
// drain). Errors stay with the File whose segment failed (stagedFile.err).
// The caller may hold its own File's lock: the others are only tried.
func (s *stager) sealIdle(ctx context.Context) {
	s.mu.Lock()
	files := make([]*stagedFile, 0, len(s.open))
	for o := range s.open {
		files = append(files, o)
	}
	s.mu.Unlock()
	for _, o := range files {
		if !o.f.mu.TryLock() {
			continue
		}
		if o.seg != nil && !o.f.closed {
			o.seal(ctx, o.f.size)
		}
		o.f.mu.Unlock()
	}
}

// noteHeldLocked keeps the peak of the held bytes. s.mu is held.
func (s *stager) noteHeldLocked() {
	s.stats.PeakHeld = max(s.stats.PeakHeld, s.held)
}

// unhold gives back n bytes counted as held (a grant a write did not use,
// a segment dropped or drained).
func (s *stager) unhold(n int64) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.held -= n
	s.cond.Broadcast()
	s.mu.Unlock()
}
