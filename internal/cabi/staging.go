package cabi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/metrics"
)

// Config is a connection's options as the JSON object that
// sluice_connect_config takes (every field optional but server):
//
//	{"server": "127.0.0.1:9400", "timeout_ms": 60000, "read_ahead": 0,
//	 "conns_per_server": 0, "staging_dir": "/nvme/stage",
//	 "staging_max": 68719476736}
type Config struct {
	Server         string `json:"server"`
	TimeoutMs      int64  `json:"timeout_ms"`
	ReadAhead      int64  `json:"read_ahead"`
	ConnsPerServer int    `json:"conns_per_server"`
	StagingDir     string `json:"staging_dir"`
	StagingMax     int64  `json:"staging_max"`
}

// ParseConfig decodes a Config and turns it into Options. Unknown fields
// are refused (a misspelt option must not be ignored silently).
func ParseConfig(js []byte) (Options, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Options{}, errs.New(errs.Invalid, "sluice: connection options: %v", err)
	}
	if dec.More() {
		return Options{}, errs.New(errs.Invalid, "sluice: connection options: more than one JSON value")
	}
	switch {
	case c.Server == "":
		return Options{}, errs.New(errs.Invalid, "sluice: connection options: no server")
	case c.TimeoutMs < 0, c.ConnsPerServer < 0, c.StagingMax < 0:
		return Options{}, errs.New(errs.Invalid, "sluice: connection options: timeout_ms, conns_per_server and staging_max must not be negative")
	case c.TimeoutMs > math.MaxInt64/int64(time.Millisecond):
		return Options{}, errs.New(errs.Invalid, "sluice: connection options: timeout_ms %d is too large", c.TimeoutMs)
	case c.StagingMax > 0 && c.StagingDir == "":
		return Options{}, errs.New(errs.Invalid, "sluice: connection options: staging_max without staging_dir")
	}
	return Options{Server: c.Server, Timeout: time.Duration(c.TimeoutMs) * time.Millisecond, ReadAhead: c.ReadAhead,
		ConnsPerServer: c.ConnsPerServer, StagingDir: c.StagingDir, StagingMax: c.StagingMax}, nil
}

// StagingStats is a client's staging area's counts (client.StagingStats)
// as JSON for sluice_staging_stats; Enabled is false without a staging
// directory.
type StagingStats struct {
	Enabled         bool    `json:"enabled"`
	InMemory        bool    `json:"in_memory"`
	Segments        int64   `json:"segments"`
	StagedBytes     int64   `json:"staged_bytes"`
	Drained         int64   `json:"drained"`
	DrainedBytes    int64   `json:"drained_bytes"`
	PendingSegments int64   `json:"pending_segments"`
	RenamesQueued   int64   `json:"renames_queued"`
	Renamed         int64   `json:"renamed"`
	DrainErrors     int64   `json:"drain_errors"`
	RenameErrors    int64   `json:"rename_errors"`
	LastError       string  `json:"last_error"`
	Adopted         int64   `json:"adopted"`
	Limit           int64   `json:"limit"`
	Held            int64   `json:"held"`
	PeakHeld        int64   `json:"peak_held"`
	Throttled       int64   `json:"throttled"`
	ThrottledSec    float64 `json:"throttled_seconds"`
}

// StagingStats returns the staging counts of client h as JSON.
func (l *Lib) StagingStats(h int64) ([]byte, error) {
	cn, err := l.conn(h)
	if err != nil {
		return nil, err
	}
	st, ok := cn.c.Staging()
	return json.Marshal(StagingStats{Enabled: ok, InMemory: st.InMemory, Segments: st.Segments, StagedBytes: st.StagedBytes,
		Drained: st.Drained, DrainedBytes: st.DrainedBytes, PendingSegments: st.PendingSegments,
		RenamesQueued: st.RenamesQueued, Renamed: st.Renamed, DrainErrors: st.DrainErrors, RenameErrors: st.LastErrors,
		LastError: st.LastError, Adopted: st.Adopted, Limit: st.Limit, Held: st.Held, PeakHeld: st.PeakHeld,
		Throttled: st.Throttled, ThrottledSec: st.ThrottledTime.Seconds()})
}

// StagingMetrics returns client h's staging area as Prometheus text: the
// sluice_absorb_* metrics that `sluice mount --http` exports (nothing
// without a staging directory).
func (l *Lib) StagingMetrics(h int64) ([]byte, error) {
	cn, err := l.conn(h)
	if err != nil {
		return nil, err
	}
	return metrics.AbsorbText(func() (client.StagingStats, bool) { return cn.c.Staging() })
}

// StagingWait waits until everything client h staged has drained to the
// targets and its queued renames are done (client.WaitStaged), within
// the connection's timeout plus a second per 16 MiB held.
func (l *Lib) StagingWait(h int64) error {
	cn, err := l.conn(h)
	if err != nil {
		return err
	}
	st, ok := cn.c.Staging()
	if !ok {
		return nil
	}
	return cn.do("wait staged", "", st.Held, func(ctx context.Context) error {
		if err := cn.c.WaitStaged(ctx); err != nil {
			return fmt.Errorf("sluice: wait for the staged data to drain: %w", err)
		}
		return nil
	})
}

// StagingHold defers the drain of client h's staging area (hold true,
// client.HoldDrain) or releases the latest hold (hold false; nothing to
// release is EINVAL).
func (l *Lib) StagingHold(h int64, hold bool) error {
	cn, err := l.conn(h)
	if err != nil {
		return err
	}
	cn.holdMu.Lock()
	defer cn.holdMu.Unlock()
	if hold {
		cn.holds = append(cn.holds, cn.c.HoldDrain())
		return nil
	}
	if len(cn.holds) == 0 {
		return errs.New(errs.Invalid, "sluice: staging hold: no hold to release")
	}
	cn.holds[len(cn.holds)-1]()
	cn.holds = cn.holds[:len(cn.holds)-1]
	return nil
}
