package client

import "testing"

func TestStagingLimit(t *testing.T) {
	t.Parallel()
	const gib = int64(1) << 30
	for _, c := range []struct {
		opt, avail, mem, want int64
	}{
		{4 * gib, 100 * gib, 0, 4 * gib},         // set: taken as it is
		{4 * gib, -1, 0, 4 * gib},                // set, space unknown
		{0, -1, 0, 0},                            // unknown: no limit
		{0, 0, 0, 0},                             // full at start: no limit
		{0, 100 * gib, 0, 75 * gib},              // a disk: three quarters
		{0, 12 * gib, 12 * gib, 6*gib + 3*gib/4}, // memory: the pool's quarter first
		{0, 200 * gib, 256 * gib, 138 * gib},     // memory: the pool's cap is 16 GiB
		{0, 8 << 20, 8 << 20, 6 << 20 / 4 * 3},   // a small tmpfs
		{0, 1 << 20, 64 << 20, 1},                // less free than the pool may take: the least
	} {
		if got := stagingLimit(c.opt, c.avail, c.mem); got != c.want {
			t.Errorf("stagingLimit(%d, %d, %d) = %d, want %d", c.opt, c.avail, c.mem, got, c.want)
		}
	}
}

func TestEffectiveLimit(t *testing.T) {
	t.Parallel()
	const mib = int64(1) << 20
	for _, c := range []struct {
		name                           string
		limit, held, avail, pool, want int64
	}{
		{"no limit stays none", 0, 0, 1 * mib, 0, 0},
		{"space unknown", 64 * mib, 0, -1, 0, 64 * mib},
		{"room enough", 64 * mib, 10 * mib, 1000 * mib, 0, 64 * mib},
		{"another program filled the disk", 64 * mib, 10 * mib, 8 * mib, 0, 16 * mib},
		{"pooled files count as room", 64 * mib, 10 * mib, 8 * mib, 8 * mib, 22 * mib},
		{"full, something held", 64 * mib, 10 * mib, 0, 0, 10 * mib},
		{"full, nothing held: the least", 64 * mib, 0, 0, 0, 1},
	} {
		if got := effectiveLimit(c.limit, c.held, c.avail, c.pool); got != c.want {
			t.Errorf("%s: effectiveLimit(%d, %d, %d, %d) = %d, want %d", c.name, c.limit, c.held, c.avail, c.pool, got, c.want)
		}
	}
}

func TestStagingSegmentMax(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ limit, want int64 }{
		{0, 0},
		{1 << 20, 256 << 10},
		{64 << 20, 2 << 20},
		{1 << 40, 64 << 20},
	} {
		if got := stagingSegmentMax(c.limit); got != c.want {
			t.Errorf("stagingSegmentMax(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
}

func TestStagingRoom(t *testing.T) {
	t.Parallel()
	const mib = int64(1) << 20
	for _, c := range []struct {
		name                      string
		limit, held, sealed, want int64
		n                         int64
		wait                      bool
	}{
		{"no limit", 0, 100 * mib, 0, 8 * mib, 8 * mib, false},
		{"fits", 16 * mib, 4 * mib, 4 * mib, 8 * mib, 8 * mib, false},
		{"fits exactly", 16 * mib, 8 * mib, 0, 8 * mib, 8 * mib, false},
		{"part fits", 16 * mib, 12 * mib, 12 * mib, 8 * mib, 4 * mib, false},
		{"a piece fits", 16 * mib, 15 * mib, 15 * mib, 8 * mib, mib, false},
		{"less than a piece free: wait", 16 * mib, 15*mib + 1, 15 * mib, 8 * mib, 0, true},
		{"full: wait", 16 * mib, 16 * mib, 1, 4096, 0, true},
		{"small write in a small gap", 16 * mib, 16*mib - 4096, 16 * mib, 4096, 4096, false},
		{"over: wait", 16 * mib, 20 * mib, 8 * mib, 4096, 0, true},
		{"full, nothing sealed: go over by a piece", 16 * mib, 16 * mib, 0, 8 * mib, mib, false},
		{"full, nothing sealed: a small write over", 16 * mib, 16 * mib, 0, 4096, 4096, false},
		{"a gap below a piece, nothing sealed: a piece", 16 * mib, 15*mib + 1, 0, 8 * mib, mib, false},
	} {
		n, wait := stagingRoom(c.limit, c.held, c.sealed, c.want)
		if n != c.n || wait != c.wait {
			t.Errorf("%s: stagingRoom(%d, %d, %d, %d) = %d, %v; want %d, %v", c.name, c.limit, c.held, c.sealed, c.want, n, wait, c.n, c.wait)
		}
	}
}

func TestSealEarly(t *testing.T) {
	t.Parallel()
	const mib = int64(1) << 20
	for _, c := range []struct {
		limit, held, seg int64
		want             bool
	}{
		{0, 100 * mib, 100 * mib, false},       // no limit: at Sync and Close only
		{64 * mib, 40 * mib, 2 * mib, true},    // pressure, a full segment
		{64 * mib, 32 * mib, 2 * mib, true},    // exactly half held
		{64 * mib, 31 * mib, 8 * mib, false},   // under half: one segment
		{64 * mib, 60 * mib, 2*mib - 1, false}, // the segment is not full yet
		{1 << 40, 1 << 39, 64 * mib, true},     // the largest segment
	} {
		if got := sealEarly(c.limit, c.held, c.seg); got != c.want {
			t.Errorf("sealEarly(%d, %d, %d) = %v, want %v", c.limit, c.held, c.seg, got, c.want)
		}
	}
}
