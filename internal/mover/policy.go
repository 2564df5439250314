// Package mover decides and carries out the object tier's automatic
// moves: per-directory policies (archive files unchanged for a while,
// release archived files after an age or when the targets fill past a
// watermark, least recently used first) applied by a pass over the
// namespace. The decisions are pure functions (Plan, over a snapshot of
// the files and the targets' fill); the pass (Mover.Pass) only gathers
// that snapshot through the client library and runs the archives and
// releases Plan returns, within its caps.
package mover

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// PolicyXattr is the extended attribute of a directory that holds its
// tier policy (Policy.Encode). Files below inherit the policy of their
// nearest directory that has one, as they inherit layouts; an empty
// policy ("v1" alone, Policy{}) stops the inheritance. trusted.* is
// writable through a mount only by root (CAP_SYS_ADMIN).
const PolicyXattr = "trusted.sluice.tier-policy"

// StatusXattr is the extended attribute of the mover's root directory
// where each pass records what it did (PassRecord), so that `sluice
// status` shows the last pass of whichever node ran it.
const StatusXattr = "trusted.sluice.mover-status"

// Counts are what a pass found and did.
type Counts struct {
	Files         int // regular files under a policy
	Archived      int
	ArchivedBytes int64
	Released      int
	ReleasedBytes int64
	Failed        int
	Took          time.Duration
}

// PassRecord is the summary of one pass that the mover stores.
type PassRecord struct {
	At   time.Time // when the pass ended
	Host string
	Counts
}

// Encode returns r's stored form: "v1" and key=value fields.
func (r PassRecord) Encode() []byte {
	return fmt.Appendf(nil, "v1 at=%d host=%s files=%d archived=%d archived-bytes=%d released=%d released-bytes=%d failed=%d took=%d",
		r.At.UnixNano(), strings.Join(strings.Fields(r.Host), "_"), r.Files, r.Archived, r.ArchivedBytes, r.Released, r.ReleasedBytes, r.Failed, int64(r.Took))
}

// ParsePassRecord decodes what Encode wrote (errs.Invalid otherwise).
func ParsePassRecord(b []byte) (PassRecord, error) {
	fields := strings.Fields(string(b))
	if len(fields) != 10 || fields[0] != "v1" {
		return PassRecord{}, errs.New(errs.Invalid, "mover status: not a v1 record: %q", b)
	}
	var r PassRecord
	var at, took int64
	ints := map[string]*int64{"at": &at, "took": &took, "archived-bytes": &r.ArchivedBytes, "released-bytes": &r.ReleasedBytes}
	counts := map[string]*int{"files": &r.Files, "archived": &r.Archived, "released": &r.Released, "failed": &r.Failed}
	want := []string{"at", "host", "files", "archived", "archived-bytes", "released", "released-bytes", "failed", "took"}
	for i, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k != want[i] {
			return PassRecord{}, errs.New(errs.Invalid, "mover status: field %d is %q, want %s", i+1, f, want[i])
		}
		var err error
		switch {
		case k == "host":
			r.Host = v
		case ints[k] != nil:
			*ints[k], err = strconv.ParseInt(v, 10, 64)
		default:
			*counts[k], err = strconv.Atoi(v)
		}
		if err != nil {
			return PassRecord{}, errs.New(errs.Invalid, "mover status: field %q: %v", f, err)
		}
	}
	r.At, r.Took = time.Unix(0, at), time.Duration(took)
	return r, nil
}

// Policy is a directory's tier policy. Zero fields are off.
type Policy struct {
	// Backend is the tier backend archives go to ("" with one backend
	// registered: that one).
	Backend string
	// ArchiveAfter archives a resident or dirty file whose data has not
	// changed for this long.
	ArchiveAfter time.Duration
	// ReleaseAfter releases an archived file not used (read or written)
	// for this long.
	ReleaseAfter time.Duration
	// High and Low are fill watermarks of the targets in percent: at High
	// or above, archived files are released, least recently used first,
	// until the fill would be at Low or below. 0: no watermark.
	High, Low int
}

// IsZero reports whether p does nothing.
func (p Policy) IsZero() bool {
	return p.ArchiveAfter == 0 && p.ReleaseAfter == 0 && p.High == 0
}

// Validate checks p's ranges.
func (p Policy) Validate() error {
	switch {
	case p.ArchiveAfter < 0 || p.ReleaseAfter < 0:
		return errs.New(errs.Invalid, "tier policy: negative duration")
	case p.High < 0 || p.High > 100 || p.Low < 0 || p.Low > 100:
		return errs.New(errs.Invalid, "tier policy: watermarks are percentages, 0 to 100 (got high %d, low %d)", p.High, p.Low)
	case p.High == 0 && p.Low != 0:
		return errs.New(errs.Invalid, "tier policy: a low watermark needs a high one")
	case p.High != 0 && p.Low >= p.High:
		return errs.New(errs.Invalid, "tier policy: low watermark %d%% is not below high %d%%", p.Low, p.High)
	case strings.ContainsAny(p.Backend, " \t\n\x00="):
		return errs.New(errs.Invalid, "tier policy: backend name %q has a space, = or NUL", p.Backend)
	}
	return nil
}

// Encode returns p's stored form: "v1" then space-separated key=value
// fields for the fields that are set, in a fixed order.
func (p Policy) Encode() []byte {
	var b strings.Builder
	b.WriteString("v1")
	if p.Backend != "" {
		b.WriteString(" backend=" + p.Backend)
	}
	if p.ArchiveAfter != 0 {
		b.WriteString(" archive-after=" + p.ArchiveAfter.String())
	}
	if p.ReleaseAfter != 0 {
		b.WriteString(" release-after=" + p.ReleaseAfter.String())
	}
	if p.High != 0 {
		fmt.Fprintf(&b, " high=%d low=%d", p.High, p.Low)
	}
	return []byte(b.String())
}

// String is Encode without the version.
func (p Policy) String() string {
	s := strings.TrimPrefix(string(p.Encode()), "v1")
	if s == "" {
		return "(none)"
	}
	return strings.TrimSpace(s)
}

// ParsePolicy decodes what Encode wrote. Unknown versions and fields,
// repeated fields and bad values are errs.Invalid.
func ParsePolicy(b []byte) (Policy, error) {
	fields := strings.Split(string(b), " ")
	if fields[0] != "v1" {
		return Policy{}, errs.New(errs.Invalid, "tier policy: unknown version %q", fields[0])
	}
	var p Policy
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" || seen[k] {
			return Policy{}, errs.New(errs.Invalid, "tier policy: bad field %q", f)
		}
		seen[k] = true
		var err error
		switch k {
		case "backend":
			p.Backend = v
		case "archive-after":
			p.ArchiveAfter, err = parseDuration(v)
		case "release-after":
			p.ReleaseAfter, err = parseDuration(v)
		case "high":
			p.High, err = parsePercent(v, 1)
		case "low":
			p.Low, err = parsePercent(v, 0)
		default:
			return Policy{}, errs.New(errs.Invalid, "tier policy: unknown field %q", k)
		}
		if err != nil {
			return Policy{}, errs.New(errs.Invalid, "tier policy: field %q: %v", f, err)
		}
	}
	if seen["high"] != seen["low"] {
		return Policy{}, errs.New(errs.Invalid, "tier policy: high and low come together")
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d <= 0 {
		err = fmt.Errorf("not positive")
	}
	return d, err
}

func parsePercent(v string, least int) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && (n < least || n > 100 || strconv.Itoa(n) != v) {
		err = fmt.Errorf("want %d to 100", least)
	}
	return n, err
}
