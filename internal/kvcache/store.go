package kvcache

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pagecache"
	"github.com/sluice-fs/sluice/internal/wire"
	"golang.org/x/sys/unix"
)

// leaseTime is how long a read that stops before a value's end protects
// the value from eviction, waiting for the reads of the rest.
const leaseTime = 30 * time.Second

// uploadIdle is how long an upload may go without a part before the next
// new upload drops it (its client sends the parts back to back, so it is
// gone), with its temporary file.
const uploadIdle = 5 * time.Minute

// share is one store's share on one target: a directory of value files
// and an index of them in memory. Safe for concurrent use.
//
// A put writes its parts to a file in tmp/ and, when complete, renames it
// into v/ under the index's lock, which makes keys write-once: of two puts
// of one key, the first to complete stores its value and the other learns
// KVExisted. Files are not synced: a value survives a crash of the
// process, not necessarily of the machine (it is a cache).
type share struct {
	dir string
	cfg wire.KVConfig
	now func() time.Time

	mu      sync.Mutex
	idx     map[string]*entry
	lru     *list.List // of *entry, most recently used first
	used    uint64
	uploads map[upKey]*upload
	st      wire.KVStatResp
}

type entry struct {
	key        string
	size       uint64
	created    int64
	expires    int64
	sums       []uint32
	hdr        int64 // header length: the value starts there
	pins       int   // reads in progress
	leaseUntil time.Time
	upload     uint64 // the put that stored it (kept in the header)
	elem       *list.Element
}

type upKey struct {
	key string
	id  uint64
}

// An upload is a value being received. Its parts may come more than once
// (a client whose connection broke sends the value again under the same
// upload number): each block counts once, and the value is complete when
// every block came.
type upload struct {
	f          *os.File
	total      uint64
	have       []bool   // per block: received
	nhave      int      // blocks received
	sums       []uint32 // per block
	hdr        int64
	last       time.Time // when its last part came
	committing bool      // its last block came: one part commits it
}

func keyFile(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(h[:2], h)
}

func (s *share) valuePath(key string) string { return filepath.Join(s.dir, "v", keyFile(key)) }

// storedBy reports whether e (nil: no value) was stored by the put with
// number upload (0 is no put's: version 1 files).
func (e *entry) storedBy(upload uint64) bool {
	return e != nil && upload != 0 && e.upload == upload
}

func (e *entry) live(now time.Time) bool { return e.expires == 0 || e.expires > now.UnixNano() }

func checkKey(key string) error {
	if key == "" || len(key) > MaxKey {
		return errs.New(errs.Invalid, "kvcache: key of %d bytes (1 to %d)", len(key), MaxKey)
	}
	return nil
}

// openShare opens (creating with cfg when create is set) the share in dir,
// indexing the values it holds.
func openShare(dir string, cfg *wire.KVConfig, now func() time.Time) (*share, error) {
	s := &share{dir: dir, now: now, idx: make(map[string]*entry), lru: list.New(), uploads: make(map[upKey]*upload)}
	cfgPath := filepath.Join(dir, "config")
	if cfg != nil {
		if err := os.MkdirAll(filepath.Join(dir, "v"), 0o755); err != nil {
			return nil, fmt.Errorf("kvcache: %w", err)
		}
		b := wire.Marshal(cfg)
		b = append(b, 0, 0, 0, 0)
		crcPut(b)
		if err := writeFileSync(cfgPath, b); err != nil {
			return nil, err
		}
		s.cfg = *cfg
	} else {
		b, err := os.ReadFile(cfgPath)
		if err != nil {
			return nil, fmt.Errorf("kvcache: %w", err)
		}
		if len(b) < 4 || !crcOK(b) {
			return nil, errs.New(errs.Corruption, "kvcache: %s fails its checksum", cfgPath)
		}
		if err := wire.Unmarshal(b[:len(b)-4], &s.cfg); err != nil {
			return nil, fmt.Errorf("kvcache: %s: %w", cfgPath, err)
		}
	}
	os.RemoveAll(filepath.Join(dir, "tmp")) // unfinished uploads
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, fmt.Errorf("kvcache: %w", err)
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	s.st.Config = s.cfg
	return s, nil
}

func crcPut(b []byte) {
	n := len(b) - 4
	v := crc32.Checksum(b[:n], castagnoli)
	b[n], b[n+1], b[n+2], b[n+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func crcOK(b []byte) bool {
	n := len(b) - 4
	v := crc32.Checksum(b[:n], castagnoli)
	return b[n] == byte(v) && b[n+1] == byte(v>>8) && b[n+2] == byte(v>>16) && b[n+3] == byte(v>>24)
}

func writeFileSync(p string, b []byte) error {
	tmp := p + ".tmp"
	f, err := os.Create(tmp)
	if err == nil {
		_, err = f.Write(b)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		return fmt.Errorf("kvcache: write %s: %w", p, err)
	}
	return nil
}

// load indexes the value files, oldest first in LRU order (the order of
// use is not persisted). A file whose header fails its checks is removed:
// the cache forgets that value.
func (s *share) load() error {
	var es []*entry
	err := filepath.WalkDir(filepath.Join(s.dir, "v"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		buf := make([]byte, fixedHeader+MaxKey+4*blocks(MaxValue)+4)
		n, _ := io.ReadFull(f, buf)
		fi, serr := f.Stat()
		f.Close()
		h, hl, err := decodeHeader(buf[:n])
		if err != nil || serr != nil || fi.Size() != hl+int64(h.Len) || filepath.Base(p) != filepath.Base(keyFile(h.Key)) {
			os.Remove(p)
			return nil
		}
		es = append(es, &entry{key: h.Key, size: h.Len, created: h.Created, expires: h.Expires, sums: h.Sums, hdr: hl, upload: h.Upload})
		return nil
	})
	if err != nil {
		return fmt.Errorf("kvcache: load %s: %w", s.dir, err)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].created > es[j].created })
	for _, e := range es {
		e.elem = s.lru.PushBack(e)
		s.idx[e.key] = e
		s.used += e.size
	}
	return nil
}

// put receives one part of a value.
func (s *share) put(m *wire.KVPutReq, data []byte) (uint8, error) {
	if err := checkKey(m.Key); err != nil {
		return 0, err
	}
	switch {
	case m.Total > MaxValue:
		return 0, errs.New(errs.TooBig, "kvcache: value of %d bytes is over the limit of %d", m.Total, MaxValue)
	case m.Off+uint64(len(data)) > m.Total || m.Off%blockSize != 0 || (len(data)%blockSize != 0 && m.Off+uint64(len(data)) != m.Total):
		return 0, errs.New(errs.Invalid, "kvcache: put part [%d, +%d) of a %d-byte value: parts start on 1 MiB boundaries and only the last is short", m.Off, len(data), m.Total)
	}
	now := s.now()
	s.mu.Lock()
	if e := s.idx[m.Key]; e != nil && e.live(now) {
		s.mu.Unlock()
		if e.storedBy(m.Upload) {
			// A part sent again by the client whose put stored the
			// value (its answer was lost with a connection).
			return wire.KVStored, nil
		}
		return wire.KVExisted, nil
	}
	uk := upKey{m.Key, m.Upload}
	up := s.uploads[uk]
	if up == nil && m.Off != 0 {
		// Parts come in order from the first: this upload's earlier
		// parts are gone (a restart, or it sat idle and was dropped).
		s.mu.Unlock()
		return 0, errs.New(errs.Stale, "kvcache: put of %q: upload %d is unknown here (its earlier parts were lost: the target restarted, or no part came for %v); put the value again from its start", m.Key, m.Upload, uploadIdle)
	}
	if up == nil {
		for _, k := range staleUploads(s.uploads, now, uploadIdle) {
			old := s.uploads[k]
			delete(s.uploads, k)
			old.f.Close() // a part still writing to it fails: "already ended"
			os.Remove(old.f.Name())
		}
		if m.Total > s.cfg.Capacity {
			s.st.Refused++
			s.mu.Unlock()
			return 0, errs.New(errs.NoSpace, "kvcache: value of %d bytes is over the share's capacity of %d", m.Total, s.cfg.Capacity)
		}
		f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "put-")
		if err != nil {
			s.mu.Unlock()
			return 0, fmt.Errorf("kvcache: %w", err)
		}
		up = &upload{f: f, total: m.Total, have: make([]bool, blocks(m.Total)), sums: make([]uint32, blocks(m.Total)), hdr: headerLen(len(m.Key), m.Total)}
		s.uploads[uk] = up
	}
	up.last = now
	s.mu.Unlock()
	if up.total != m.Total {
		return 0, errs.New(errs.Invalid, "kvcache: put of %q: parts disagree on the length", m.Key)
	}
	if _, err := up.f.WriteAt(data, up.hdr+int64(m.Off)); err != nil {
		s.dropUpload(uk, up)
		if errors.Is(err, os.ErrClosed) {
			// The upload ended while this part was written: a part sent
			// twice found it committed, or it was dropped as idle.
			s.mu.Lock()
			e := s.idx[m.Key]
			s.mu.Unlock()
			if e.storedBy(m.Upload) {
				return wire.KVStored, nil
			}
			return 0, errs.New(errs.Stale, "kvcache: put of %q: upload %d ended while this part was written; put the value again from its start", m.Key, m.Upload)
		}
		return 0, fmt.Errorf("kvcache: put %q: %w", m.Key, err)
	}
	sums := make([]uint32, 0, (len(data)+blockSize-1)/blockSize)
	for i := 0; i < len(data); i += blockSize {
		sums = append(sums, crc32.Checksum(data[i:min(i+blockSize, len(data))], castagnoli))
	}
	s.mu.Lock()
	first := int(m.Off / blockSize)
	for i, sum := range sums {
		up.sums[first+i] = sum
		if !up.have[first+i] {
			up.have[first+i] = true
			up.nhave++
		}
	}
	done := up.nhave == len(up.have) && !up.committing
	up.committing = up.committing || done
	s.mu.Unlock()
	if !done {
		// Not complete, or another part is committing it (a part sent
		// twice): the client asks again and hears "stored".
		return wire.KVPart, nil
	}
	return s.commit(m.Key, uk, up, now)
}

// staleUploads returns the uploads whose last part came idle or longer
// before now.
func staleUploads(ups map[upKey]*upload, now time.Time, idle time.Duration) []upKey {
	var out []upKey
	for k, up := range ups {
		if now.Sub(up.last) >= idle {
			out = append(out, k)
		}
	}
	return out
}

func (s *share) dropUpload(uk upKey, up *upload) {
	s.mu.Lock()
	if s.uploads[uk] == up {
		delete(s.uploads, uk)
	}
	s.mu.Unlock()
	up.f.Close()
	os.Remove(up.f.Name())
}

// commit stores a complete upload, evicting what the watermarks say.
func (s *share) commit(key string, uk upKey, up *upload, now time.Time) (uint8, error) {
	h := header{Key: key, Len: up.total, Created: now.UnixNano(), Upload: uk.id, Sums: up.sums}
	if s.cfg.TTL > 0 {
		h.Expires = h.Created + s.cfg.TTL
	}
	if _, err := up.f.WriteAt(h.encode(), 0); err != nil {
		s.dropUpload(uk, up)
		return 0, fmt.Errorf("kvcache: put %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.uploads, uk)
	defer up.f.Close()
	if e := s.idx[key]; e != nil && e.live(now) {
		os.Remove(up.f.Name())
		return wire.KVExisted, nil // another put of the key completed first
	}
	cands := make([]candidate, 0, s.lru.Len())
	for el := s.lru.Back(); el != nil; el = el.Prev() {
		e := el.Value.(*entry)
		cands = append(cands, candidate{Key: e.key, Size: e.size, Expired: !e.live(now), Leased: e.pins > 0 || e.leaseUntil.After(now)})
	}
	victims, ok := planEviction(cands, s.used, up.total, s.cfg.Capacity)
	if !ok {
		s.st.Refused++
		os.Remove(up.f.Name())
		return 0, errs.New(errs.NoSpace, "kvcache: no room for %d bytes: the share holds %d of %d and the rest is being read", up.total, s.used, s.cfg.Capacity)
	}
	for _, k := range victims {
		e := s.idx[k]
		if !e.live(now) {
			s.st.Expired++
		} else {
			s.st.Evictions++
		}
		s.removeLocked(e)
	}
	p := s.valuePath(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		os.Remove(up.f.Name())
		return 0, fmt.Errorf("kvcache: %w", err)
	}
	if old := s.idx[key]; old != nil {
		s.removeLocked(old) // expired
	}
	if err := os.Rename(up.f.Name(), p); err != nil {
		os.Remove(up.f.Name())
		return 0, fmt.Errorf("kvcache: put %q: %w", key, err)
	}
	e := &entry{key: key, size: up.total, created: h.Created, expires: h.Expires, sums: h.Sums, hdr: up.hdr, upload: uk.id}
	e.elem = s.lru.PushFront(e)
	s.idx[key] = e
	s.used += e.size
	s.st.Puts++
	return wire.KVStored, nil
}

func (s *share) removeLocked(e *entry) {
	os.Remove(s.valuePath(e.key))
	s.lru.Remove(e.elem)
	delete(s.idx, e.key)
	s.used -= e.size
}

// got is what a get hands the connection: the bytes in a pooled buffer
// (data, given back by release once sent), or, for a get that may be sent
// unread, a range of the value's file (file, closed by release) with the
// CRC32C each of its blocks was stored with (sums).
type got struct {
	total   uint64
	data    []byte
	file    *wire.FileRange
	sums    []uint32
	release func()
}

// get reads [off, off+n) of a value. With unread set it may instead hand
// out the range of the value's file, without reading it, when the range
// starts on a block and ends on one or at the value's end (a range not all
// in the page cache is asked of the disk first, FADV_WILLNEED, and sent as
// it comes: ADR 0030's addendum of 2026-12-03): whoever
// receives the bytes must check them against got.sums and ask again
// without unread on a mismatch, which tells damage at rest
// (errs.Corruption) from a garbled transfer. Otherwise the bytes are read
// into a pooled buffer with every block they touch checked. (A new buffer
// per get was zeroed by the runtime first and left to the collector: 16
// MiB per get.)
func (s *share) get(key string, off, n uint64, unread bool) (g got, err error) {
	now := s.now()
	s.mu.Lock()
	s.st.Gets++
	e := s.idx[key]
	if e == nil || !e.live(now) {
		s.mu.Unlock()
		return g, errs.New(errs.NotFound, "kvcache: no value for key %q", key)
	}
	s.st.Hits++
	if off > e.size {
		s.mu.Unlock()
		return g, errs.New(errs.Range, "kvcache: read at %d of a %d-byte value", off, e.size)
	}
	n = min(n, e.size-off)
	if off+n < e.size {
		e.leaseUntil = now.Add(leaseTime) // the rest is to be read
	} else {
		e.leaseUntil = time.Time{}
	}
	e.pins++
	s.lru.MoveToFront(e.elem)
	f, err := os.Open(s.valuePath(key)) // under the lock: eviction cannot unlink it first
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		e.pins--
		if g.file != nil {
			s.st.SentUnread++
		}
		s.mu.Unlock()
	}()
	if err != nil {
		return g, fmt.Errorf("kvcache: get %q: %w", key, err)
	}
	g.total = e.size
	first, last := off/blockSize, (off+n+blockSize-1)/blockSize
	if unread && n > 0 && off%blockSize == 0 && ((off+n)%blockSize == 0 || off+n == e.size) {
		// The open file keeps the bytes if the value is evicted before
		// they are sent. A range that is not all cached goes out this
		// way too: the kernel is asked for all of it now, and the
		// connection sends each page as the disk delivers it, where a
		// read here would read it all before sending any.
		if !pagecache.Cached(f.Fd(), e.hdr+int64(off), int64(n)) {
			unix.Fadvise(int(f.Fd()), e.hdr+int64(off), int64(n), unix.FADV_WILLNEED) // a hint: a failure changes only the timing
		}
		g.file = &wire.FileRange{F: f, Off: e.hdr + int64(off), N: int(n)}
		g.sums = slices.Clone(e.sums[first:last])
		g.release = func() { f.Close() }
		return g, nil
	}
	defer f.Close()
	// Read whole blocks to check them.
	start, end := first*blockSize, min(last*blockSize, e.size)
	buf := wire.GetBuf(int(end - start))
	release := func() { wire.PutBuf(buf) }
	if _, err := f.ReadAt(buf, e.hdr+int64(start)); err != nil {
		release()
		return got{}, fmt.Errorf("kvcache: get %q: %w", key, err)
	}
	for b := first; b < last; b++ {
		blk := buf[(b-first)*blockSize : min((b-first+1)*blockSize, uint64(len(buf)))]
		if crc32.Checksum(blk, castagnoli) != e.sums[b] {
			release()
			return got{}, errs.New(errs.Corruption, "kvcache: value of %q in %s: block %d fails its checksum", key, s.dir, b)
		}
	}
	g.data, g.release = buf[off-start:off-start+n], release
	return g, nil
}

func (s *share) exists(keys []string) []bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]bool, len(keys))
	for i, k := range keys {
		e := s.idx[k]
		out[i] = e != nil && e.live(now)
	}
	return out
}

func (s *share) del(keys []string) uint32 {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint32
	for _, k := range keys {
		if e := s.idx[k]; e != nil {
			if e.live(now) {
				n++
			}
			s.removeLocked(e)
			s.st.Deletes++
		}
	}
	return n
}

func (s *share) list(after string, limit int) wire.KVListResp {
	now := s.now()
	s.mu.Lock()
	keys := make([]string, 0, len(s.idx))
	for k, e := range s.idx {
		if k > after && e.live(now) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var r wire.KVListResp
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	if len(keys) > limit {
		keys, r.More = keys[:limit], true
	}
	for _, k := range keys {
		e := s.idx[k]
		r.Entries = append(r.Entries, wire.KVEntry{Key: k, Size: e.size, Created: e.created})
	}
	s.mu.Unlock()
	return r
}

func (s *share) stat() wire.KVStatResp {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st
	r.Keys, r.Used = uint64(len(s.idx)), s.used
	return r
}

func (s *share) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, up := range s.uploads {
		up.f.Close()
		os.Remove(up.f.Name())
		delete(s.uploads, k)
	}
}

// validStore checks a store name: 1 to 64 of [A-Za-z0-9._-], not "." or "..".
func validStore(name string) error {
	ok := name != "" && len(name) <= 64 && name != "." && name != ".." &&
		strings.IndexFunc(name, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		}) < 0
	if !ok {
		return errs.New(errs.Invalid, "kvcache: store name %q (1 to 64 of A-Z a-z 0-9 . _ -)", name)
	}
	return nil
}

func sameConfig(a, b *wire.KVConfig) bool {
	return bytes.Equal(wire.Marshal(a), wire.Marshal(b))
}
