package cluster

import (
	"encoding/binary"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Key prefixes of the cluster state in the metadata service's KV. The
// metadata service (internal/meta/keys.go) reserves them for this package;
// see doc.go for the layout.
const (
	pfxTarget = 'T' // "T" + u32 id -> target record
	pfxNode   = 'N' // "N" + node name -> node record
	pfxChain  = 'R' // "R" + u32 chain id -> replication chain
	pfxPool   = 'P' // "P" + name -> pool: u16 n | n × u32 target
	pfxDrain  = 'W' // "W" + u32 id -> u8 1: the target is draining, 2: it was removed
	pfxMove   = 'V' // "V" + u32 chain id -> u32 old | u32 new: a draining replica's move under way
)

func targetKey(id placement.TargetID) []byte {
	return binary.BigEndian.AppendUint32([]byte{pfxTarget}, uint32(id))
}

func u64Value(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func parseU64(b []byte, what string) (uint64, error) {
	if len(b) != 8 {
		return 0, errs.New(errs.Corruption, "cluster: %s record has %d bytes, want 8", what, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// clusterState is what the KV holds about the cluster.
type clusterState struct {
	targets   map[placement.TargetID]targetRecord
	nodes     map[string]nodeRecord
	chains    map[placement.ChainID]placement.Chain
	chainsVer uint64
	pools     map[string][]placement.TargetID
	draining  map[placement.TargetID]bool
	removed   map[placement.TargetID]bool
	moves     map[placement.ChainID]placement.DrainMove
}

type targetRecord struct {
	Node, Addr string
}

type nodeRecord struct {
	Addr        string
	Incarnation uint64
	LastSeen    int64 // unix ns, by the metadata service's clock
	Stats       []wire.TargetStat
	Resyncs     []wire.ResyncStat
	QosUse      []wire.QosUse // what its jobs asked of it lately
}

// Cluster state keys (see doc.go).
var (
	keyNextTarget = []byte("Cnext-target")
	keyNextChain  = []byte("Cnext-chain")
	keyChainsVer  = []byte("Cchains")
)

func nodeKey(node string) []byte { return append([]byte{pfxNode}, node...) }

func chainKey(id placement.ChainID) []byte {
	return binary.BigEndian.AppendUint32([]byte{pfxChain}, uint32(id))
}

// A target record is 0x01 | u16 len | node | addr. Records written before
// nodes existed hold just the address (which never starts with 0x01); they
// belong to node "local".
func (r targetRecord) encode() []byte {
	b := []byte{1}
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Node)))
	b = append(b, r.Node...)
	return append(b, r.Addr...)
}

func decodeTargetRecord(b []byte) (targetRecord, error) {
	if len(b) == 0 {
		return targetRecord{}, errs.New(errs.Corruption, "cluster: empty target record")
	}
	if b[0] != 1 {
		return targetRecord{Node: LocalNode, Addr: string(b)}, nil
	}
	if len(b) < 3 || len(b) < 3+int(binary.BigEndian.Uint16(b[1:])) {
		return targetRecord{}, errs.New(errs.Corruption, "cluster: short target record")
	}
	n := int(binary.BigEndian.Uint16(b[1:]))
	return targetRecord{Node: string(b[3 : 3+n]), Addr: string(b[3+n:])}, nil
}

// A node record is the wire encoding of a HeartbeatReq (with Node empty)
// followed by i64 last seen.
func (r nodeRecord) encode() []byte {
	m := wire.HeartbeatReq{Addr: r.Addr, Incarnation: r.Incarnation, Targets: r.Stats, Resyncs: r.Resyncs, QosUse: r.QosUse}
	b := wire.Marshal(&m)
	return binary.BigEndian.AppendUint64(b, uint64(r.LastSeen))
}

func decodeNodeRecord(b []byte) (nodeRecord, error) {
	var m wire.HeartbeatReq
	if len(b) < 8 {
		return nodeRecord{}, errs.New(errs.Corruption, "cluster: short node record")
	}
	if err := wire.Unmarshal(b[:len(b)-8], &m); err != nil {
		return nodeRecord{}, errs.New(errs.Corruption, "cluster: bad node record: %v", err)
	}
	seen := int64(binary.BigEndian.Uint64(b[len(b)-8:]))
	return nodeRecord{Addr: m.Addr, Incarnation: m.Incarnation, LastSeen: seen, Stats: m.Targets, Resyncs: m.Resyncs, QosUse: m.QosUse}, nil
}

func encodeChain(c *placement.Chain) []byte {
	return wire.Marshal(&wire.ChainMsg{Chain: *c})
}

func decodeChain(b []byte) (placement.Chain, error) {
	var m wire.ChainMsg
	if err := wire.Unmarshal(b, &m); err != nil {
		return m.Chain, errs.New(errs.Corruption, "cluster: bad chain record: %v", err)
	}
	c := m.Chain
	if err := c.Validate(); err != nil {
		return c, errs.New(errs.Corruption, "cluster: bad chain record: %v", err)
	}
	return c, nil
}

func moveKey(chain placement.ChainID) []byte {
	return binary.BigEndian.AppendUint32([]byte{pfxMove}, uint32(chain))
}

func encodeMove(m placement.DrainMove) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(m.Old)), uint32(m.New))
}

func decodeMove(k, v []byte) (placement.DrainMove, error) {
	if len(k) != 4 || len(v) != 8 {
		return placement.DrainMove{}, errs.New(errs.Corruption, "cluster: bad move record %x = %x", k, v)
	}
	return placement.DrainMove{Chain: placement.ChainID(binary.BigEndian.Uint32(k)),
		Old: placement.TargetID(binary.BigEndian.Uint32(v)), New: placement.TargetID(binary.BigEndian.Uint32(v[4:]))}, nil
}
