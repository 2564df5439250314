package wire

// The metadata service's QoS gate admits the namespace requests that
// clients make for applications (MetaScheduled), one unit of cost each (a
// lookup), a listing one more for every ReadDirPerLookup entries it
// returns (ReadDirPlusPerLookup with their attributes), a batch import
// (OpTierImport) one per entry. A client pacing a
// limited job (client.Options.Job) waits for the same requests at the same
// costs. Not scheduled, so that a storm from clients can never hold them
// back: cluster membership (register, heartbeats), the change feed's long
// polls, syncs, the end of a truncate's cut and the polls of writers
// waiting for it (OpCutEnd, OpCutGen), the settings themselves (an administrator limiting a storm
// must get through), and the system's own movers (migration, tier,
// staging, profile shipping, audit).
var metaScheduled = [...]Op{
	OpResolve, OpLookup, OpGetAttr, OpSetAttr,
	OpCreate, OpMkdir, OpSymlink, OpReadlink,
	OpUnlink, OpRmdir, OpRename, OpLink, OpReadDir,
	OpGetXattr, OpSetXattr, OpListXattr, OpRemoveXattr,
	OpGetLayout, OpCommitWrite, OpWriteInline, OpReadInline,
	OpSetChunks, OpResolveRead, OpPutFile, OpOpenIno, OpWriteInlineAttr, OpCommitWriteAttr, OpTierImport, OpTierForget, OpTierImportDry,
	OpStatfs, OpCutBegin,
}

// MetaScheduledOps returns the requests the metadata service's QoS gate
// admits.
func MetaScheduledOps() []Op { return metaScheduled[:] }

// MetaScheduled reports whether the metadata service's QoS gate admits op.
func MetaScheduled(op Op) bool {
	for _, o := range metaScheduled {
		if o == op {
			return true
		}
	}
	return false
}

// Entries of a directory listing that cost the metadata service what one
// lookup request does, measured by meta's BenchmarkReadDirCost (a loopback
// connection, the reply encoded and decoded; 2026-11-28, the 2-core
// development VM: 59 names, or 15-16 names with their attributes).
const (
	ReadDirPerLookup     = 64
	ReadDirPlusPerLookup = 16
)

// QosCost is what the page of a listing costs in the metadata service's
// QoS unit (lookup requests): one request, plus its entries. The gate
// admits a listing at the cost of one request and charges the rest once
// the page is read.
func (m *ReadDirResp) QosCost() int {
	per := ReadDirPerLookup
	if len(m.Entries) > 0 && m.Entries[0].Attr != nil {
		per = ReadDirPlusPerLookup
	}
	return 1 + len(m.Entries)/per
}

// QosCost is what a batch import costs in the metadata service's QoS unit:
// each entry as much as the create request it takes the place of (the
// gate admits the batch at the cost of one request and charges the rest
// once it is done), so that a job's limit or a lower class paces an
// import of many keys.
func (m *TierImportResp) QosCost() int { return max(1, len(m.Results)) }
