package wire

import "github.com/sluice-fs/sluice/internal/placement"

// Messages of the KV-cache store (docs/kvcache.md). Every request names a
// target and a store; a store has a share on each of its targets.

// KVConfig is a store's configuration, the same on each of its targets.
type KVConfig struct {
	Capacity uint64 // bytes of values per target
	TTL      int64  // ns a value lives after its put; 0 forever
	Replicas uint8  // targets holding each key (1 to 3)
	Targets  []placement.TargetID
}

func (m *KVConfig) Encode(e *Encoder) {
	e.U64(m.Capacity)
	e.I64(m.TTL)
	e.U8(m.Replicas)
	e.Uvarint(uint64(len(m.Targets)))
	for _, t := range m.Targets {
		e.U32(uint32(t))
	}
}

func (m *KVConfig) Decode(d *Decoder) {
	m.Capacity = d.U64()
	m.TTL = d.I64()
	m.Replicas = d.U8()
	m.Targets = make([]placement.TargetID, d.Count(4))
	for i := range m.Targets {
		m.Targets[i] = placement.TargetID(d.U32())
	}
}

// KVReq names a store's share on a target.
type KVReq struct {
	Target placement.TargetID
	Store  string
}

func (m *KVReq) Encode(e *Encoder) { e.U32(uint32(m.Target)); e.String(m.Store) }
func (m *KVReq) Decode(d *Decoder) { m.Target = placement.TargetID(d.U32()); m.Store = d.String() }

// KVCreateReq creates a store's share (the same config again is no error).
type KVCreateReq struct {
	KVReq
	Config KVConfig
}

func (m *KVCreateReq) Encode(e *Encoder) { m.KVReq.Encode(e); m.Config.Encode(e) }
func (m *KVCreateReq) Decode(d *Decoder) { m.KVReq.Decode(d); m.Config.Decode(d) }

// KVStatResp is a share's configuration and counters.
type KVStatResp struct {
	Config                      KVConfig
	Keys, Used                  uint64
	Puts, Gets, Hits, Deletes   uint64
	Evictions, Expired, Refused uint64
	// SentUnread counts the gets whose bytes the target sent from its page
	// cache without reading them (KVReadFlagUnverified; appended
	// 2026-12-02, 0 from an older target).
	SentUnread uint64
}

func (m *KVStatResp) Encode(e *Encoder) {
	m.Config.Encode(e)
	for _, v := range []uint64{m.Keys, m.Used, m.Puts, m.Gets, m.Hits, m.Deletes, m.Evictions, m.Expired, m.Refused, m.SentUnread} {
		e.U64(v)
	}
}

func (m *KVStatResp) Decode(d *Decoder) {
	m.Config.Decode(d)
	for _, p := range []*uint64{&m.Keys, &m.Used, &m.Puts, &m.Gets, &m.Hits, &m.Deletes, &m.Evictions, &m.Expired, &m.Refused} {
		*p = d.U64()
	}
	m.SentUnread = 0
	if d.More() {
		m.SentUnread = d.U64()
	}
}

// KVPutReq sends the part of a value at Off (the request's data); Total is
// the value's length. Parts of one upload share Upload (chosen by the
// client); the part that completes the value stores it.
type KVPutReq struct {
	KVReq
	Key    string
	Upload uint64
	Total  uint64
	Off    uint64
	// DataCRC is the CRC32C of the part (the frame's data), checked by
	// the target (HasDataCRC; appended 2026-12-02, absent from an older
	// client and then not checked; ADR 0029).
	DataCRC    uint32
	HasDataCRC bool
}

func (m *KVPutReq) Encode(e *Encoder) {
	m.KVReq.Encode(e)
	e.String(m.Key)
	e.U64(m.Upload)
	e.U64(m.Total)
	e.U64(m.Off)
	e.OptU32(m.DataCRC, m.HasDataCRC)
}

func (m *KVPutReq) Decode(d *Decoder) {
	m.KVReq.Decode(d)
	m.Key = d.String()
	m.Upload = d.U64()
	m.Total = d.U64()
	m.Off = d.U64()
	m.DataCRC, m.HasDataCRC = d.OptU32()
}

// Put outcomes (KVPutResp.Status).
const (
	KVStored  uint8 = 0 // the value is stored (this put made it)
	KVExisted uint8 = 1 // the key already had a value: write-once, nothing changed
	KVPart    uint8 = 2 // a part was received; more are to come
)

// KVPutResp says what a put did.
type KVPutResp struct{ Status uint8 }

func (m *KVPutResp) Encode(e *Encoder) { e.U8(m.Status) }
func (m *KVPutResp) Decode(d *Decoder) { m.Status = d.U8() }

// KVGetReq reads Len bytes at Off of a value. A read that does not reach
// the value's end takes a read lease on it until a later read does or
// the lease times out: it is not evicted meanwhile.
type KVGetReq struct {
	KVReq
	Key string
	Off uint64
	Len uint64
	// Flags: ReadFlagUnverified (appended 2026-12-02, left out when 0;
	// ADR 0030): the client checks every block of the reply against
	// KVGetResp.BlockSums when they come, and asks again without the flag
	// on a mismatch.
	Flags uint32
}

func (m *KVGetReq) Encode(e *Encoder) {
	m.KVReq.Encode(e)
	e.String(m.Key)
	e.U64(m.Off)
	e.U64(m.Len)
	e.OptU32(m.Flags, m.Flags != 0)
}

func (m *KVGetReq) Decode(d *Decoder) {
	m.KVReq.Decode(d)
	m.Key = d.String()
	m.Off = d.U64()
	m.Len = d.U64()
	m.Flags, _ = d.OptU32()
}

// KVBlockSize is the block of a value that one stored CRC32C covers
// (KVGetResp.BlockSums); a put's parts start on its multiples.
const KVBlockSize = 1 << 20

// KVGetResp carries the value's total length; the bytes are the data,
// whose CRC32C the client checks (HasDataCRC; appended 2026-12-02, absent
// from an older target and in process; ADR 0029). Instead, to a request
// with ReadFlagUnverified, a target may send bytes it did not read (from
// its page cache, with sendfile) and the CRC32C each 1 MiB block of the
// value was stored with (HasBlockSums, appended 2026-12-02: the data
// starts on a block and ends on one or at the value's end). DataCRC is
// then absent (sent as 0).
type KVGetResp struct {
	Total        uint64
	DataCRC      uint32
	HasDataCRC   bool
	BlockSums    []uint32
	HasBlockSums bool
}

func (m *KVGetResp) Encode(e *Encoder) {
	e.U64(m.Total)
	if m.HasBlockSums {
		e.U32(0)
		e.Uvarint(uint64(len(m.BlockSums)))
		for _, c := range m.BlockSums {
			e.U32(c)
		}
		return
	}
	e.OptU32(m.DataCRC, m.HasDataCRC)
}

func (m *KVGetResp) Decode(d *Decoder) {
	m.Total = d.U64()
	m.DataCRC, m.HasDataCRC = d.OptU32()
	m.BlockSums, m.HasBlockSums = nil, false
	if d.More() {
		m.DataCRC, m.HasDataCRC = 0, false
		n := d.Count(4)
		m.BlockSums, m.HasBlockSums = make([]uint32, n), true
		for i := range m.BlockSums {
			m.BlockSums[i] = d.U32()
		}
	}
}

// KVKeysReq names keys of a share.
type KVKeysReq struct {
	KVReq
	Keys []string
}

func (m *KVKeysReq) Encode(e *Encoder) {
	m.KVReq.Encode(e)
	e.Uvarint(uint64(len(m.Keys)))
	for _, k := range m.Keys {
		e.String(k)
	}
}

func (m *KVKeysReq) Decode(d *Decoder) {
	m.KVReq.Decode(d)
	m.Keys = make([]string, d.Count(1))
	for i := range m.Keys {
		m.Keys[i] = d.String()
	}
}

// KVExistsResp says for each key whether it has a live value.
type KVExistsResp struct{ Present []bool }

func (m *KVExistsResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Present)))
	for _, p := range m.Present {
		e.Bool(p)
	}
}

func (m *KVExistsResp) Decode(d *Decoder) {
	m.Present = make([]bool, d.Count(1))
	for i := range m.Present {
		m.Present[i] = d.Bool()
	}
}

// KVDeleteResp counts the keys that had a value.
type KVDeleteResp struct{ Deleted uint32 }

func (m *KVDeleteResp) Encode(e *Encoder) { e.U32(m.Deleted) }
func (m *KVDeleteResp) Decode(d *Decoder) { m.Deleted = d.U32() }

// KVListReq lists a share's keys after After, in key order.
type KVListReq struct {
	KVReq
	After string
	Limit uint32
}

func (m *KVListReq) Encode(e *Encoder) { m.KVReq.Encode(e); e.String(m.After); e.U32(m.Limit) }
func (m *KVListReq) Decode(d *Decoder) { m.KVReq.Decode(d); m.After = d.String(); m.Limit = d.U32() }

// KVEntry is a listed key.
type KVEntry struct {
	Key     string
	Size    uint64
	Created int64 // unix ns
}

// KVListResp is a page of keys.
type KVListResp struct {
	Entries []KVEntry
	More    bool
}

func (m *KVListResp) Encode(e *Encoder) {
	e.Uvarint(uint64(len(m.Entries)))
	for _, x := range m.Entries {
		e.String(x.Key)
		e.U64(x.Size)
		e.I64(x.Created)
	}
	e.Bool(m.More)
}

func (m *KVListResp) Decode(d *Decoder) {
	m.Entries = make([]KVEntry, d.Count(17))
	for i := range m.Entries {
		m.Entries[i] = KVEntry{Key: d.String(), Size: d.U64(), Created: d.I64()}
	}
	m.More = d.Bool()
}
