package client

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/wire"
)

// AuditQuery selects audit trail entries (docs/audit.md).
type AuditQuery struct {
	// Path keeps the entries about the entry at Path (also once removed),
	// the inode it names now, and entries inside it if it is a directory.
	Path string
	// Since keeps the entries made at or after it (zero: all).
	Since time.Time
}

// AuditEntry is one entry of the audit trail and its sequence number in
// the hash chain.
type AuditEntry struct {
	Seq uint64
	audit.Entry
}

// Audit returns the audit trail's entries that q selects, oldest first.
// The service seals pending entries first, so every change acknowledged
// before the call is listed.
func (c *Client) Audit(ctx context.Context, q AuditQuery) iter.Seq2[AuditEntry, error] {
	return func(yield func(AuditEntry, error) bool) {
		req := wire.AuditListReq{Path: q.Path}
		if !q.Since.IsZero() {
			req.Since = q.Since.UnixNano()
		}
		for {
			var resp wire.AuditListResp
			if err := c.metaCall(ctx, wire.OpAuditList, &req, &resp); err != nil {
				yield(AuditEntry{}, fmt.Errorf("audit ls: %w", err))
				return
			}
			for _, r := range resp.Entries {
				e, err := audit.Decode(r.Record)
				if err != nil {
					err = fmt.Errorf("audit ls: entry %d: %w", r.Seq, err)
				}
				if !yield(AuditEntry{Seq: r.Seq, Entry: e}, err) || err != nil {
					return
				}
			}
			if resp.Next == 0 {
				return
			}
			req.After = resp.Next
		}
	}
}

// AuditReport is the result of AuditVerify.
type AuditReport struct {
	Entries  uint64 // entries checked
	HeadSeq  uint64 // the chain head: last sequence number and its hash
	HeadHash string // hex
	// BrokenSeq is the first entry at which the chain does not verify, 0
	// if it is intact; Reason says why.
	BrokenSeq uint64
	Reason    string
}

// AuditVerify has the service seal pending entries and check the audit
// trail's hash chain. A broken chain is not an error: see BrokenSeq.
func (c *Client) AuditVerify(ctx context.Context) (AuditReport, error) {
	var r wire.AuditVerifyResp
	if err := c.metaCall(ctx, wire.OpAuditVerify, &wire.Empty{}, &r); err != nil {
		return AuditReport{}, fmt.Errorf("audit verify: %w", err)
	}
	return AuditReport{Entries: r.Entries, HeadSeq: r.HeadSeq, HeadHash: fmt.Sprintf("%x", r.HeadHash),
		BrokenSeq: r.BrokenSeq, Reason: r.Reason}, nil
}
