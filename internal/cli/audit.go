package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// AuditLs prints the audit trail's entries that q selects, one a line: as
// text, or as JSON objects (JSON lines, for SIEM tools).
func (e *Env) AuditLs(ctx context.Context, q client.AuditQuery, asJSON bool) error {
	for ae, err := range e.Client.Audit(ctx, q) {
		if err != nil {
			return err
		}
		if !asJSON {
			fmt.Fprintln(e.Stdout, ae.Text(ae.Seq))
			continue
		}
		b, err := ae.JSON(ae.Seq)
		if err != nil {
			return fmt.Errorf("audit ls: entry %d: %w", ae.Seq, err)
		}
		b = append(b, '\n')
		if _, err := e.Stdout.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// AuditVerify checks the audit trail's hash chain and prints the result.
// A broken chain is an error of class errs.Corruption naming the first bad
// entry.
func (e *Env) AuditVerify(ctx context.Context) error {
	r, err := e.Client.AuditVerify(ctx)
	if err != nil {
		return err
	}
	if r.BrokenSeq != 0 {
		fmt.Fprintf(e.Stdout, "audit trail BROKEN at entry %d of %d: %s\n", r.BrokenSeq, r.HeadSeq, r.Reason)
		return errs.New(errs.Corruption, "sluice audit verify: the audit trail is broken at entry %d: %s", r.BrokenSeq, r.Reason)
	}
	fmt.Fprintf(e.Stdout, "audit trail intact: %d entries, head %d %s\n", r.Entries, r.HeadSeq, r.HeadHash)
	return nil
}

// ParseSince reads a --since value: an RFC 3339 time, a date (2006-01-02),
// or a duration before now (90m, 24h).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %q: a negative duration", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--since %q: not a time (RFC 3339, 2006-01-02) or a duration (24h)", s)
}
