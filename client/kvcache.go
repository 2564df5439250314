package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// The KV-cache store (docs/kvcache.md): named stores of write-once values
// on the storage targets, for LLM inference servers offloading KV caches.
// Keys are not files: a put or a delete is one request to each target the
// key lands on (rendezvous hashing over the store's targets), with no
// metadata transaction.

// kvPart is the size of one put or get request of a value.
const kvPart = 32 << 20

// KVConfig configures a new store.
type KVConfig struct {
	// Capacity is the bytes of values the store holds, split evenly over
	// its targets; past 95% of a target's share, puts evict down to 85%,
	// least recently used first (values being read stay).
	Capacity int64
	// TTL is how long a value lives after its put (0: until evicted).
	TTL time.Duration
	// Replicas is the number of targets holding each value (1 to 3;
	// default 1). Puts write all of them; gets read any.
	Replicas int
}

// KVStore is an open store. Safe for concurrent use.
type KVStore struct {
	c     *Client
	name  string
	cfg   wire.KVConfig
	nodes map[placement.TargetID]string
}

// KVCreate creates store name over every target of the cluster. Creating
// a store again with the same configuration is no error.
func (c *Client) KVCreate(ctx context.Context, name string, cfg KVConfig) error {
	c.mu.Lock()
	var ts []placement.TargetID
	for _, t := range c.info.Targets {
		ts = append(ts, t.ID)
	}
	c.mu.Unlock()
	slices.Sort(ts)
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	switch {
	case len(ts) == 0:
		return errs.New(errs.Unavailable, "client: kv create %s: no targets", name)
	case cfg.Capacity < int64(len(ts)):
		return errs.New(errs.Invalid, "client: kv create %s: capacity %d for %d targets", name, cfg.Capacity, len(ts))
	case cfg.Replicas < 1 || cfg.Replicas > 3 || cfg.Replicas > len(ts):
		return errs.New(errs.Invalid, "client: kv create %s: %d replicas over %d targets", name, cfg.Replicas, len(ts))
	}
	wc := wire.KVConfig{Capacity: uint64(cfg.Capacity) / uint64(len(ts)), TTL: int64(cfg.TTL), Replicas: uint8(cfg.Replicas), Targets: ts}
	g, gctx := errgroup.WithContext(ctx)
	for _, t := range ts {
		g.Go(func() error {
			return c.kvCall(gctx, t, wire.OpKVCreate, &wire.KVCreateReq{KVReq: wire.KVReq{Target: t, Store: name}, Config: wc}, nil, nil, nil)
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("kv create %s: %w", name, err)
	}
	return nil
}

// KVOpen opens store name.
func (c *Client) KVOpen(ctx context.Context, name string) (*KVStore, error) {
	c.mu.Lock()
	var ts []placement.TargetID
	for _, t := range c.info.Targets {
		ts = append(ts, t.ID)
	}
	c.mu.Unlock()
	var err error
	for _, t := range ts {
		var r wire.KVStatResp
		if err = c.kvCall(ctx, t, wire.OpKVStat, &wire.KVReq{Target: t, Store: name}, nil, &r, nil); err == nil {
			s := &KVStore{c: c, name: name, cfg: r.Config, nodes: make(map[placement.TargetID]string)}
			c.mu.Lock()
			for _, ta := range c.info.Targets {
				s.nodes[ta.ID] = ta.Node
			}
			c.mu.Unlock()
			return s, nil
		}
	}
	if err == nil {
		err = errs.New(errs.Unavailable, "client: no targets")
	}
	return nil, fmt.Errorf("kv open %s: %w", name, err)
}

func (c *Client) kvCall(ctx context.Context, t placement.TargetID, op wire.Op, req wire.Message, data [][]byte, resp wire.Message, into []byte) error {
	_, err := c.kvCallN(ctx, t, op, req, data, resp, into)
	return err
}

// kvCallN is kvCall that returns how many bytes it read into into. Values
// are checked in transit (ADR 0029): a put's part carries its CRC32C, a
// read's bytes are checked against the reply's; data garbled in transit is
// sent again, at most maxGarbled times (not in process: nothing is in
// transit). A get over the network asks for ReadFlagUnverified (ADR 0030):
// the target may then send cached whole blocks without reading them, with
// the CRC32C each was stored with, which the client checks; after a
// mismatch the same target is asked again without the flag, and then
// verifies the bytes itself, so damage on its disk comes back as
// errs.Corruption while a garbled transfer reads right. A request other
// than a put whose connection broke (errs.Unavailable) is sent once more
// at once, on a new connection.
func (c *Client) kvCallN(ctx context.Context, t placement.TargetID, op wire.Op, req wire.Message, data [][]byte, resp wire.Message, into []byte) (int, error) {
	verify, broken := false, false
	for garbled := 0; ; garbled++ {
		conn, err := c.targetConn(ctx, t)
		if err != nil {
			return 0, err
		}
		switch r := req.(type) {
		case *wire.KVPutReq:
			if !conn.InProcess() && !r.HasDataCRC {
				r.DataCRC, r.HasDataCRC = checksum.DataCRC(data...), true
			}
		case *wire.KVGetReq:
			r.Flags = 0
			if !conn.InProcess() && !verify {
				r.Flags = wire.ReadFlagUnverified
			}
		}
		n, err := conn.Call(ctx, op, req, data, resp, into)
		if g, ok := resp.(*wire.KVGetResp); ok && err == nil {
			switch {
			case g.HasBlockSums:
				if !kvBlocksMatch(into[:n], g.BlockSums) {
					verify = true
					err = errs.New(errs.Garbled, "client: kv read of %d bytes from target %d sent unread: a block does not match the CRC32C it was stored with", n, t)
				}
			case g.HasDataCRC:
				if got := checksum.DataCRC(into[:n]); got != g.DataCRC {
					err = errs.New(errs.Garbled, "client: kv read of %d bytes from target %d: the data's CRC32C is %08x, the reply says %08x (garbled in transit)", n, t, got, g.DataCRC)
				}
			}
		}
		if errs.CodeOf(err) == errs.Unavailable && op != wire.OpKVPut && !broken && ctx.Err() == nil {
			// The connection broke: once more at once, on a new one (a
			// put goes again from its start: putOne).
			broken = true
			continue
		}
		if errs.CodeOf(err) != errs.Garbled || garbled >= maxGarbled || ctx.Err() != nil {
			return n, err
		}
	}
}

// kvBlocksMatch checks b, the bytes of whole blocks of a value from one
// on (the last may be the value's short end), against sums, each block's
// stored CRC32C.
func kvBlocksMatch(b []byte, sums []uint32) bool {
	if len(sums) != (len(b)+wire.KVBlockSize-1)/wire.KVBlockSize {
		return false
	}
	for i, sum := range sums {
		if checksum.DataCRC(b[i*wire.KVBlockSize:min((i+1)*wire.KVBlockSize, len(b))]) != sum {
			return false
		}
	}
	return true
}

func (s *KVStore) req(t placement.TargetID) wire.KVReq { return wire.KVReq{Target: t, Store: s.name} }

// targetsOf returns the targets holding key: its rendezvous ranking over
// the store's targets, taking targets of distinct storage nodes first.
func (s *KVStore) targetsOf(key string) []placement.TargetID {
	r := int(s.cfg.Replicas)
	if r <= 1 {
		return placement.Rendezvous(key, s.cfg.Targets, 1)
	}
	return distinctNodes(placement.Rendezvous(key, s.cfg.Targets, len(s.cfg.Targets)), s.nodes, r)
}

// distinctNodes picks r of ranked, in rank order, preferring targets on
// nodes not picked yet.
func distinctNodes(ranked []placement.TargetID, nodes map[placement.TargetID]string, r int) []placement.TargetID {
	out := make([]placement.TargetID, 0, r)
	used := map[string]bool{}
	picked := map[placement.TargetID]bool{}
	for _, t := range ranked {
		if len(out) < r && !used[nodes[t]] {
			out = append(out, t)
			used[nodes[t]], picked[t] = true, true
		}
	}
	for _, t := range ranked {
		if len(out) < r && !picked[t] {
			out = append(out, t)
		}
	}
	return out
}

// Put stores values[i] under keys[i], all in parallel. Keys are
// write-once: stored[i] is false when the key already had a value (from
// an earlier or a concurrent put), which is kept. A value is stored once
// every replica has it: the key's first replica first (it decides between
// concurrent puts), then the others in parallel.
func (s *KVStore) Put(ctx context.Context, keys []string, values [][]byte) (stored []bool, err error) {
	if len(keys) != len(values) {
		return nil, errs.New(errs.Invalid, "client: kv put: %d keys, %d values", len(keys), len(values))
	}
	stored = make([]bool, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i, k := range keys {
		g.Go(func() error {
			// The first replica decides which put of a key wins; only the
			// winner writes the other replicas, so they all hold its value.
			upload := rand.Uint64() | 1 // 0 is no put's (version 1 value files)
			ts := s.targetsOf(k)
			st, err := s.putOne(gctx, ts[0], k, upload, values[i])
			if err != nil || st == wire.KVExisted {
				return err
			}
			rg, rctx := errgroup.WithContext(gctx)
			for _, t := range ts[1:] {
				rg.Go(func() error {
					_, err := s.putOne(rctx, t, k, upload, values[i])
					return err
				})
			}
			if err := rg.Wait(); err != nil {
				return err
			}
			stored[i] = true
			return nil
		})
	}
	return stored, g.Wait()
}

// putOne sends a value to one target in parts, in order, and returns what
// the last part did (stored, or existed). The value is sent again from its
// start, under the same upload number, when the target lost the upload's
// earlier parts (it restarted between two parts, or dropped the upload as
// idle: errs.Stale) or the connection broke (errs.Unavailable: the target
// counts each block once and answers "stored" to the upload that stored
// the value), until Options.RetryTimeout has passed (putRetry).
func (s *KVStore) putOne(ctx context.Context, t placement.TargetID, key string, upload uint64, v []byte) (uint8, error) {
	var deadline time.Time
	for attempt := 0; ; attempt++ {
		st, err := s.putParts(ctx, t, key, upload, v)
		if err == nil || ctx.Err() != nil {
			return st, err
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(s.c.opts.RetryTimeout)
		}
		code := errs.CodeOf(err)
		again, wait := putRetry(code, attempt, now, deadline)
		if !again {
			if code == errs.Stale || code == errs.Unavailable {
				return 0, fmt.Errorf("%w (gave up after %d tries)", err, attempt+1)
			}
			return 0, err
		}
		if perr := pause.For(ctx, wait); perr != nil {
			return 0, errors.Join(err, perr)
		}
		if code == errs.Unavailable {
			_ = s.c.refreshCluster(ctx) // the target may serve elsewhere now; a failure shows in the next try
		}
	}
}

// putRetry decides whether a put that failed with code on its attempt-th
// try (from 0) goes again, and after how long: a lost upload (errs.Stale)
// or a broken connection (errs.Unavailable) goes again until the
// deadline, at once the first time, then after a growing, jittered pause
// (at most 500 ms); anything else is the put's answer.
func putRetry(code errs.Code, attempt int, now, deadline time.Time) (again bool, wait time.Duration) {
	if (code != errs.Stale && code != errs.Unavailable) || now.After(deadline) {
		return false, 0
	}
	if attempt == 0 {
		return true, 0
	}
	return true, retryPause(attempt)
}

func (s *KVStore) putParts(ctx context.Context, t placement.TargetID, key string, upload uint64, v []byte) (uint8, error) {
	for off := 0; ; off += kvPart {
		end := min(off+kvPart, len(v))
		var r wire.KVPutResp
		req := &wire.KVPutReq{KVReq: s.req(t), Key: key, Upload: upload, Total: uint64(len(v)), Off: uint64(off)}
		if err := s.c.kvCall(ctx, t, wire.OpKVPut, req, [][]byte{v[off:end]}, &r, nil); err != nil {
			return 0, fmt.Errorf("kv put %q on target %d: %w", key, t, err)
		}
		switch {
		case r.Status == wire.KVExisted:
			return r.Status, nil
		case end == len(v) && r.Status != wire.KVStored:
			// The last part must complete the value; a target that
			// still waits for parts did not store it.
			return 0, errs.New(errs.Stale, "client: kv put %q on target %d: the last part left the value incomplete (status %d)", key, t, r.Status)
		case end == len(v):
			return r.Status, nil
		}
	}
}

// Get reads the values of keys into bufs[i] (the caller's buffers) and
// returns each one's length, -1 for a key without a value. A buffer
// shorter than its value is errs.Range, naming the length needed. Reads go
// to a key's first replica, then the others.
func (s *KVStore) Get(ctx context.Context, keys []string, bufs [][]byte) (n []int, err error) {
	if len(keys) != len(bufs) {
		return nil, errs.New(errs.Invalid, "client: kv get: %d keys, %d buffers", len(keys), len(bufs))
	}
	n = make([]int, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i, k := range keys {
		g.Go(func() error {
			var last error
			for _, t := range s.targetsOf(k) {
				got, err := s.get(gctx, t, k, bufs[i])
				if err == nil {
					n[i] = got
					return nil
				}
				last = err
				if c := errs.CodeOf(err); c != errs.NotFound && c != errs.Unavailable {
					break
				}
			}
			if errs.CodeOf(last) == errs.NotFound {
				n[i] = -1
				return nil
			}
			return fmt.Errorf("kv get %q: %w", k, last)
		})
	}
	return n, g.Wait()
}

func (s *KVStore) get(ctx context.Context, t placement.TargetID, key string, buf []byte) (int, error) {
	var total uint64
	off := 0
	for {
		want := min(kvPart, len(buf)-off)
		if off > 0 && uint64(off) >= total {
			return off, nil
		}
		var r wire.KVGetResp
		req := &wire.KVGetReq{KVReq: s.req(t), Key: key, Off: uint64(off), Len: uint64(want)}
		if err := s.c.kvCall(ctx, t, wire.OpKVGet, req, nil, &r, buf[off:off+want]); err != nil {
			return 0, err
		}
		total = r.Total
		if total > uint64(len(buf)) {
			return 0, errs.New(errs.Range, "client: kv get %q: value of %d bytes, buffer of %d", key, total, len(buf))
		}
		off += min(want, int(total)-off)
		if uint64(off) >= total {
			return off, nil
		}
	}
}

// GetAt reads len(p) bytes (fewer at the value's end) of key's value at
// off into p and returns how many, and the value's length. A read that
// stops before the end holds a read lease on the value: it is not evicted
// until a read reaches its end or 30 s pass. A missing key is
// errs.NotFound.
func (s *KVStore) GetAt(ctx context.Context, key string, p []byte, off int64) (n int, total int64, err error) {
	if len(p) > wire.MaxData || off < 0 {
		return 0, 0, errs.New(errs.Invalid, "client: kv read of %d bytes at %d", len(p), off)
	}
	var last error
	for _, t := range s.targetsOf(key) {
		var r wire.KVGetResp
		req := &wire.KVGetReq{KVReq: s.req(t), Key: key, Off: uint64(off), Len: uint64(len(p))}
		n, err = s.c.kvCallN(ctx, t, wire.OpKVGet, req, nil, &r, p)
		if err == nil {
			return n, int64(r.Total), nil
		}
		last = err
		if c := errs.CodeOf(err); c != errs.NotFound && c != errs.Unavailable {
			break
		}
	}
	return 0, 0, fmt.Errorf("kv get %q: %w", key, last)
}

// Exists returns how many of keys, from the first, have a value: the
// longest stored prefix of a list of prefix keys.
func (s *KVStore) Exists(ctx context.Context, keys []string) (int, error) {
	present := make([]bool, len(keys))
	by := map[placement.TargetID][]int{}
	for i, k := range keys {
		t := s.targetsOf(k)[0]
		by[t] = append(by[t], i)
	}
	g, gctx := errgroup.WithContext(ctx)
	for t, idx := range by {
		g.Go(func() error {
			ks := make([]string, len(idx))
			for j, i := range idx {
				ks[j] = keys[i]
			}
			var r wire.KVExistsResp
			if err := s.c.kvCall(gctx, t, wire.OpKVExists, &wire.KVKeysReq{KVReq: s.req(t), Keys: ks}, nil, &r, nil); err != nil {
				return fmt.Errorf("kv exists on target %d: %w", t, err)
			}
			for j, i := range idx {
				present[i] = j < len(r.Present) && r.Present[j]
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	n := 0
	for n < len(present) && present[n] {
		n++
	}
	return n, nil
}

// Delete removes keys from every replica and returns how many had a value
// (summed over the replicas, divided by their number).
func (s *KVStore) Delete(ctx context.Context, keys []string) (int, error) {
	by := map[placement.TargetID][]string{}
	for _, k := range keys {
		for _, t := range s.targetsOf(k) {
			by[t] = append(by[t], k)
		}
	}
	var mu sync.Mutex
	var deleted int
	g, gctx := errgroup.WithContext(ctx)
	for t, ks := range by {
		g.Go(func() error {
			var r wire.KVDeleteResp
			if err := s.c.kvCall(gctx, t, wire.OpKVDelete, &wire.KVKeysReq{KVReq: s.req(t), Keys: ks}, nil, &r, nil); err != nil {
				return fmt.Errorf("kv delete on target %d: %w", t, err)
			}
			mu.Lock()
			deleted += int(r.Deleted)
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	return deleted / int(s.cfg.Replicas), err
}

// KVEntry is a listed key.
type KVEntry struct {
	Key     string
	Size    int64
	Created time.Time
}

// List returns the store's keys in order (each once, whatever its
// replicas).
func (s *KVStore) List(ctx context.Context) ([]KVEntry, error) {
	seen := map[string]KVEntry{}
	for _, t := range s.cfg.Targets {
		after := ""
		for {
			var r wire.KVListResp
			if err := s.c.kvCall(ctx, t, wire.OpKVList, &wire.KVListReq{KVReq: s.req(t), After: after, Limit: 10000}, nil, &r, nil); err != nil {
				return nil, fmt.Errorf("kv list on target %d: %w", t, err)
			}
			for _, e := range r.Entries {
				seen[e.Key] = KVEntry{Key: e.Key, Size: int64(e.Size), Created: time.Unix(0, e.Created)}
				after = e.Key
			}
			if !r.More {
				break
			}
		}
	}
	out := make([]KVEntry, 0, len(seen))
	for _, e := range seen {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b KVEntry) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	})
	return out, nil
}

// KVStats sums a store's counters over its targets.
type KVStats struct {
	Targets, Replicas                   int
	Capacity                            int64 // bytes, all targets
	TTL                                 time.Duration
	Keys, Used                          int64 // replicas counted each
	Puts, Gets, Hits, Deletes           int64
	Evictions, Expired, RefusedForSpace int64
	// SentUnread counts gets whose bytes a target sent from its page
	// cache without reading them (ADR 0030; checked by the client).
	SentUnread int64
}

// Stats returns the store's counters since its targets started (keys
// and used bytes are current).
func (s *KVStore) Stats(ctx context.Context) (KVStats, error) {
	st := KVStats{Targets: len(s.cfg.Targets), Replicas: int(s.cfg.Replicas), TTL: time.Duration(s.cfg.TTL)}
	for _, t := range s.cfg.Targets {
		var r wire.KVStatResp
		if err := s.c.kvCall(ctx, t, wire.OpKVStat, &wire.KVReq{Target: t, Store: s.name}, nil, &r, nil); err != nil {
			return KVStats{}, fmt.Errorf("kv stats on target %d: %w", t, err)
		}
		st.Capacity += int64(r.Config.Capacity)
		st.Keys += int64(r.Keys)
		st.Used += int64(r.Used)
		st.Puts += int64(r.Puts)
		st.Gets += int64(r.Gets)
		st.Hits += int64(r.Hits)
		st.Deletes += int64(r.Deletes)
		st.Evictions += int64(r.Evictions)
		st.Expired += int64(r.Expired)
		st.RefusedForSpace += int64(r.Refused)
		st.SentUnread += int64(r.SentUnread)
	}
	return st, nil
}
