package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"time"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// The audit trail (docs/audit.md, ADR 0012). An audited change writes its
// entry in its own transaction as a pending record, a blind write under a
// key of its own ("Ap" + time + random), so that audited transactions
// conflict with nothing more than without the trail. The sealer moves
// pending records, oldest key first, to the chain ("Ae" + sequence),
// sealing each with its hash and its predecessor's (audit.Seal), and keeps
// the chain head ("Ah"). One sealing transaction reads the head, so
// sealers of services sharing a DB serialize there, not the audited
// changes.
var (
	auditPendingPrefix = []byte{pfxAudit, 'p'}
	auditEntryPrefix   = []byte{pfxAudit, 'e'}
	keyAuditHead       = []byte{pfxAudit, 'h'}
)

const (
	// sealBatch is how many pending records one sealing transaction
	// moves: 2 writes and 1 compare each, within etcd's default of 128
	// operations per transaction.
	sealBatch = 48
	// sealLag: the background sealer leaves records younger than this for
	// its next pass, so that its scan does not conflict with the audited
	// transactions still committing (their keys hold their start time).
	sealLag = 100 * time.Millisecond
	// sealEvery is how often the background sealer looks for records
	// without being kicked.
	sealEvery = time.Second
	// sealFullEvery: one background pass in this many scans the pending
	// records from the first key (sealAudit).
	sealFullEvery = 16
	// auditPage bounds the entries one AuditList or verify step scans.
	auditPage = 4096
)

func auditPendingKey(t int64, r uint64) []byte {
	k := make([]byte, 0, 18)
	k = append(k, auditPendingPrefix...)
	k = binary.BigEndian.AppendUint64(k, uint64(max(t, 0)))
	return binary.BigEndian.AppendUint64(k, r)
}

func auditEntryKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, 10), auditEntryPrefix...), seq)
}

func parseAuditEntryKey(k []byte) (uint64, error) {
	if len(k) != len(auditEntryPrefix)+8 {
		return 0, errs.New(errs.Corruption, "meta: audit entry key of %d bytes", len(k))
	}
	return binary.BigEndian.Uint64(k[len(auditEntryPrefix):]), nil
}

type credKey struct{}

// WithCred returns ctx carrying who makes the request, for the audit trail.
// The wire handlers set it from the request's optional credentials; c nil
// leaves ctx as it is.
func WithCred(ctx context.Context, c *wire.Cred) context.Context {
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, credKey{}, *c)
}

func whoOf(ctx context.Context, c *wire.Cred) audit.Who {
	if c != nil {
		return audit.Who{Known: true, Uid: c.Uid, Gid: c.Gid}
	}
	if c, ok := ctx.Value(credKey{}).(wire.Cred); ok {
		return audit.Who{Known: true, Uid: c.Uid, Gid: c.Gid}
	}
	return audit.Who{}
}

// appendAudit writes e as a pending record in tx, if the trail is on.
func (s *Service) appendAudit(tx kv.Txn, e *audit.Entry) error {
	switch {
	case !s.auditOn:
		return nil
	case s.auditInline:
		return appendAuditInline(tx, e)
	}
	tx.Set(auditPendingKey(e.Time, rand.Uint64()), e.Encode())
	return nil
}

// appendAuditInline seals e onto the chain in the change's own transaction:
// the design ADR 0012 rejects, kept for BenchmarkAudit's comparison. Every
// audited transaction reads and writes the chain head, so all of them
// conflict with each other.
func appendAuditInline(tx kv.Txn, e *audit.Entry) error {
	h, err := readAuditHead(tx)
	if err != nil {
		return err
	}
	h.Seq++
	var sealed []byte
	sealed, h.Hash = audit.Seal(h.Seq, h.Hash, e.Encode())
	tx.Set(auditEntryKey(h.Seq), sealed)
	tx.Set(keyAuditHead, h.Encode())
	return nil
}

// audited is called after an audited change committed: it wakes the
// background sealer.
func (s *Service) audited() {
	if !s.auditOn {
		return
	}
	select {
	case s.sealKick <- struct{}{}:
	default:
	}
}

func modeText(m uint32) string { return fmt.Sprintf("%04o", m&modePerm) }

func layoutText(l placement.Layout) string { return l.String() }

func readAuditHead(tx kv.Txn) (audit.Head, error) {
	v, err := tx.Get(keyAuditHead)
	if errors.Is(err, kv.ErrNotFound) {
		return audit.Head{}, nil
	}
	if err != nil {
		return audit.Head{}, err
	}
	return audit.DecodeHead(v)
}

// SealAudit chains the pending audit records written before cutoff (Unix
// ns) and returns how many it sealed. AuditList and AuditVerify call it
// with the current time; Run calls it in the background.
func (s *Service) SealAudit(ctx context.Context, cutoff int64) (int, error) {
	return s.sealAudit(ctx, cutoff, true)
}

// sealAudit is SealAudit; unless full, it scans the pending records from
// where its last pass ended instead of from the first key, skipping the
// deletions of the records it sealed (in an LSM engine a scan steps over
// each one until a compaction drops it). A record committed below that
// point after the pass is sealed by the next full pass.
func (s *Service) sealAudit(ctx context.Context, cutoff int64, full bool) (int, error) {
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	total := 0
	end := auditPendingKey(cutoff, 0)
	start := auditPendingPrefix
	if !full && s.sealCursor != nil {
		start = s.sealCursor
	}
	for {
		n := 0
		var last []byte
		err := s.update(ctx, func(tx kv.Txn) error {
			n, last = 0, nil
			h, err := readAuditHead(tx)
			if err != nil {
				return err
			}
			err = tx.Scan(start, end, sealBatch, func(k, v []byte) bool {
				h.Seq++
				var sealed []byte
				sealed, h.Hash = audit.Seal(h.Seq, h.Hash, v)
				tx.Set(auditEntryKey(h.Seq), sealed)
				tx.Delete(k)
				n++
				last = k
				return true
			})
			if err != nil || n == 0 {
				return err
			}
			tx.Set(keyAuditHead, h.Encode())
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("meta: seal the audit trail: %w", err)
		}
		total += n
		if last != nil {
			start = append([]byte(nil), last...)
			s.sealCursor = start
		}
		if n < sealBatch {
			return total, nil
		}
	}
}

// runSealer seals pending audit records until ctx is done: soon after an
// audited change (kick) and every sealEvery.
func (s *Service) runSealer(ctx context.Context) {
	t := time.NewTicker(sealEvery)
	defer t.Stop()
	passes := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.sealKick:
			// Let a batch gather, and its transactions commit.
			if pause.For(ctx, sealLag) != nil {
				return
			}
		}
		passes++
		full := passes%sealFullEvery == 0
		if _, err := s.sealAudit(ctx, s.now().Add(-sealLag).UnixNano(), full); err != nil && ctx.Err() == nil {
			s.log.Warn("meta: sealing the audit trail failed; will retry", "err", err)
		}
	}
}

// AuditList seals the pending records, then returns a page of the trail's
// entries (wire.AuditListReq says which).
func (s *Service) AuditList(ctx context.Context, req *wire.AuditListReq) (wire.AuditListResp, error) {
	if _, err := s.SealAudit(ctx, s.nowNs()+1); err != nil {
		return wire.AuditListResp{}, err
	}
	limit := int(req.Limit)
	if limit <= 0 || limit > auditPage {
		limit = auditPage
	}
	var resp wire.AuditListResp
	err := s.db.View(ctx, func(tx kv.Txn) error {
		resp = wire.AuditListResp{}
		var f *auditFilter
		if req.Path != "" {
			var err error
			if f, err = newAuditFilter(tx, req.Path); err != nil {
				return err
			}
		}
		scanned := 0
		var scanErr error
		err := tx.Scan(auditEntryKey(req.After+1), kv.PrefixEnd(auditEntryPrefix), auditPage, func(k, v []byte) bool {
			scanned++
			seq, err := parseAuditEntryKey(k)
			if err != nil {
				scanErr = err
				return false
			}
			resp.Next = seq
			_, _, rec, err := audit.Open(v)
			if err != nil {
				scanErr = fmt.Errorf("audit entry %d: %w", seq, err)
				return false
			}
			e, err := audit.Decode(rec)
			if err != nil {
				scanErr = fmt.Errorf("audit entry %d: %w", seq, err)
				return false
			}
			if e.Time < req.Since || !f.match(&e) {
				return true
			}
			resp.Entries = append(resp.Entries, wire.AuditRecord{Seq: seq, Record: append([]byte(nil), rec...)})
			return len(resp.Entries) < limit
		})
		if err != nil {
			return err
		}
		if scanErr != nil {
			return scanErr
		}
		if scanned < auditPage && len(resp.Entries) < limit {
			resp.Next = 0 // the scan ran out
		}
		return nil
	})
	if err != nil {
		return wire.AuditListResp{}, fmt.Errorf("meta: list the audit trail: %w", err)
	}
	return resp, nil
}

// auditFilter selects the entries about one path: its entry (by parent and
// name, so a removed file's entries match), the inode it names now, and
// entries inside it if it is a directory.
type auditFilter struct {
	ino       uint64 // 0: the path names nothing now
	parent    uint64 // 0: the parent does not exist (or the path is "/")
	name      string
	insideDir bool
}

func newAuditFilter(tx kv.Txn, p string) (*auditFilter, error) {
	p = path.Clean("/" + p)
	f := &auditFilter{}
	a, err := resolveTx(tx, p, false)
	switch {
	case err == nil:
		f.ino = a.Ino
		f.insideDir = a.Mode&modeType == modeDir
	case !errors.Is(err, errs.ErrNotFound):
		return nil, err
	}
	if p != "/" {
		d, err := resolveTx(tx, path.Dir(p), true)
		switch {
		case err == nil:
			f.parent, f.name = d.Ino, path.Base(p)
		case !errors.Is(err, errs.ErrNotFound):
			return nil, err
		}
	}
	return f, nil
}

func (f *auditFilter) match(e *audit.Entry) bool {
	switch {
	case f == nil:
		return true
	case f.ino != 0 && (e.Ino == f.ino || e.Replaced == f.ino):
		return true
	case f.parent != 0 && (e.Parent == f.parent && e.Name == f.name || e.NewParent == f.parent && e.NewName == f.name):
		return true
	case f.insideDir && (e.Parent == f.ino || e.NewParent == f.ino):
		return true
	}
	return false
}

// AuditVerify seals the pending records, then checks the whole chain
// against its head. A broken chain is reported in the response
// (BrokenSeq, Reason), not as an error.
func (s *Service) AuditVerify(ctx context.Context) (wire.AuditVerifyResp, error) {
	if _, err := s.SealAudit(ctx, s.nowNs()+1); err != nil {
		return wire.AuditVerifyResp{}, err
	}
	var v audit.Verifier
	var resp wire.AuditVerifyResp
	next := uint64(1)
	for done := false; !done; {
		start := v // View may run fn again: each run starts from here
		err := s.db.View(ctx, func(tx kv.Txn) error {
			v, done = start, false
			scanned := 0
			var scanErr error
			err := tx.Scan(auditEntryKey(next), kv.PrefixEnd(auditEntryPrefix), auditPage, func(k, val []byte) bool {
				scanned++
				seq, err := parseAuditEntryKey(k)
				if err != nil {
					scanErr = err
					return false
				}
				_, err = v.Add(seq, val)
				next = seq + 1
				return err == nil
			})
			if err != nil {
				return err
			}
			if scanErr != nil {
				return scanErr
			}
			if scanned == auditPage && v.Err() == nil {
				return nil // more pages
			}
			// The last page and the head come from one snapshot.
			h, err := readAuditHead(tx)
			if err != nil && !errors.Is(err, errs.ErrCorruption) {
				return err
			}
			resp.HeadSeq, resp.HeadHash = h.Seq, append([]byte(nil), h.Hash[:]...)
			n, verr := v.Finish(h)
			if err != nil && verr == nil {
				verr = &audit.BrokenError{Seq: n, Reason: "the chain head is damaged: " + err.Error()}
			}
			resp.Entries = n
			var be *audit.BrokenError
			if errors.As(verr, &be) {
				resp.BrokenSeq, resp.Reason = be.Seq, be.Reason
			}
			done = true
			return nil
		})
		if err != nil {
			return wire.AuditVerifyResp{}, fmt.Errorf("meta: verify the audit trail: %w", err)
		}
	}
	return resp, nil
}
