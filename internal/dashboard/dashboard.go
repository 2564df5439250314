// Package dashboard is the web dashboard of a server's admin port and the
// data behind `sluice status` and `sluice top`: a Snapshot of the server's
// metrics as JSON at /api/snapshot, and a self-contained page (assets
// embedded in the binary, no CDN) at / that polls it and draws the targets'
// fill levels, throughput, IOPS, latency, metadata op rates and recent
// errors.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-fs/sluice/internal/metrics"
)

//go:embed assets
var assets embed.FS

// Target is one storage target in a Snapshot; counters are cumulative.
type Target struct {
	ID               string  `json:"id"`
	Up               bool    `json:"up"`
	Capacity         float64 `json:"capacity"`
	Free             float64 `json:"free"`
	Used             float64 `json:"used"`
	Chunks           float64 `json:"chunks"`
	ReadBytes        float64 `json:"read_bytes"`
	WriteBytes       float64 `json:"write_bytes"`
	ReadOps          float64 `json:"read_ops"`
	WriteOps         float64 `json:"write_ops"`
	Errors           float64 `json:"errors"`
	ChecksumFailures float64 `json:"checksum_failures"`
}

// Fill is the fraction of the target's file system in use.
func (t Target) Fill() float64 {
	if t.Capacity == 0 {
		return 0
	}
	return 1 - t.Free/t.Capacity
}

// Op is one wire operation's cumulative count and total time.
type Op struct {
	Op      string  `json:"op"`
	Kind    string  `json:"kind"`
	Count   float64 `json:"count"`
	Seconds float64 `json:"seconds"`
}

// Pool is a pool of targets (metadata services only): its size and use.
type Pool struct {
	Name     string  `json:"name"`
	Targets  float64 `json:"targets"`
	Capacity float64 `json:"capacity"`
	Used     float64 `json:"used"`
}

// Snapshot is a server's state at one time.
// Mover is the tier mover of this process (sluice serve --mover-every).
type Mover struct {
	Passes        float64 `json:"passes"`
	Archived      float64 `json:"archived"`
	ArchivedBytes float64 `json:"archived_bytes"`
	Released      float64 `json:"released"`
	ReleasedBytes float64 `json:"released_bytes"`
	Failures      float64 `json:"failures"`
	LastFiles     float64 `json:"last_pass_files"`
	LastSeconds   float64 `json:"last_pass_seconds"`
}

// MoverPass is the last tier mover pass over the whole tree, by whichever
// node ran it (from the metadata: metadata services only).
type MoverPass struct {
	Host          string  `json:"host"`
	End           float64 `json:"end"` // Unix seconds
	Files         float64 `json:"files"`
	Archived      float64 `json:"archived"`
	ArchivedBytes float64 `json:"archived_bytes"`
	Released      float64 `json:"released"`
	ReleasedBytes float64 `json:"released_bytes"`
	Failures      float64 `json:"failures"`
	Seconds       float64 `json:"seconds"`
}

// Rebalancer is the rebalancer of this process (sluice serve
// --rebalance-every).
type Rebalancer struct {
	Passes      float64 `json:"passes"`
	Files       float64 `json:"files"`
	Bytes       float64 `json:"bytes"`
	Failures    float64 `json:"failures"`
	LastSpread  float64 `json:"last_spread"`
	LastSeconds float64 `json:"last_pass_seconds"`
}

// StageJob is what the stagers of a job reported to this metadata service
// (sluice stage, docs/tier.md).
type StageJob struct {
	Job           string  `json:"job"`
	Hits          float64 `json:"hits"`
	Misses        float64 `json:"misses"`
	AheadBytes    float64 `json:"ahead_bytes"`
	OnDemandBytes float64 `json:"on_demand_bytes"`
	Restored      float64 `json:"restored"`
	RestoredBytes float64 `json:"restored_bytes"`
	Failures      float64 `json:"failures"`
	Running       float64 `json:"running"`
	Depth         float64 `json:"depth"`
}

// Absorb is the staging area of this process's mount (sluice serve
// --mount --staging-dir; sluice_absorb_*, docs/checkpoint.md).
type Absorb struct {
	Held             float64 `json:"held_bytes"`
	Peak             float64 `json:"peak_bytes"`
	Limit            float64 `json:"limit_bytes"`
	Staged           float64 `json:"staged_bytes"`
	Drained          float64 `json:"drained_bytes"`
	Pending          float64 `json:"pending_segments"`
	Throttled        float64 `json:"throttled"`
	ThrottledSeconds float64 `json:"throttled_seconds"`
	Waiting          float64 `json:"waiting"`
	RenameErrors     float64 `json:"rename_errors"`
	InMemory         bool    `json:"in_memory"`
}

// Restores are the restores of released files this metadata service
// decided since it started (sluice_hsm_*).
type Restores struct {
	Leases        float64 `json:"leases"`
	Takeovers     float64 `json:"takeovers"`
	Restored      float64 `json:"restored"`
	RestoredBytes float64 `json:"restored_bytes"`
	CutToZero     float64 `json:"cut_to_zero"`
}

type Snapshot struct {
	Time        time.Time            `json:"time"`
	Targets     []Target             `json:"targets"`
	Pools       []Pool               `json:"pools,omitempty"`
	Mover       *Mover               `json:"mover,omitempty"`
	MoverPass   *MoverPass           `json:"mover_pass,omitempty"`
	Rebalancer  *Rebalancer          `json:"rebalancer,omitempty"`
	Stage       []StageJob           `json:"stage,omitempty"`
	Restores    *Restores            `json:"restores,omitempty"`
	Absorb      *Absorb              `json:"absorb,omitempty"`
	Ops         []Op                 `json:"ops"`
	Errors      float64              `json:"errors"`
	Connections float64              `json:"connections"`
	Recent      []metrics.ErrorEvent `json:"recent_errors"`
}

// Take gathers a Snapshot from mx.
func Take(mx *metrics.Metrics) (*Snapshot, error) {
	fams, err := mx.Registry().Gather()
	if err != nil {
		return nil, fmt.Errorf("dashboard: gather metrics: %w", err)
	}
	s := &Snapshot{Time: time.Now(), Recent: mx.RecentErrors()}
	targets := map[string]*Target{}
	tgt := func(m *dto.Metric) *Target {
		id := label(m, "target")
		t, ok := targets[id]
		if !ok {
			t = &Target{ID: id}
			targets[id] = t
		}
		return t
	}
	pools := map[string]*Pool{}
	pool := func(m *dto.Metric) *Pool {
		name := label(m, "pool")
		p, ok := pools[name]
		if !ok {
			p = &Pool{Name: name}
			pools[name] = p
		}
		return p
	}
	mover := func() *Mover {
		if s.Mover == nil {
			s.Mover = &Mover{}
		}
		return s.Mover
	}
	moverPass := func(m *dto.Metric) *MoverPass {
		if s.MoverPass == nil {
			s.MoverPass = &MoverPass{}
		}
		s.MoverPass.Host = label(m, "host")
		return s.MoverPass
	}
	stages := map[string]*StageJob{}
	stage := func(m *dto.Metric) *StageJob {
		job := label(m, "job")
		j, ok := stages[job]
		if !ok {
			j = &StageJob{Job: job}
			stages[job] = j
		}
		return j
	}
	restores := func() *Restores {
		if s.Restores == nil {
			s.Restores = &Restores{}
		}
		return s.Restores
	}
	absorb := func() *Absorb {
		if s.Absorb == nil {
			s.Absorb = &Absorb{}
		}
		return s.Absorb
	}
	rebalancer := func() *Rebalancer {
		if s.Rebalancer == nil {
			s.Rebalancer = &Rebalancer{}
		}
		return s.Rebalancer
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			switch f.GetName() {
			case "sluice_rebalance_passes_total":
				rebalancer().Passes = v
			case "sluice_rebalance_moved_files_total":
				rebalancer().Files = v
			case "sluice_rebalance_moved_bytes_total":
				rebalancer().Bytes = v
			case "sluice_rebalance_failures_total":
				rebalancer().Failures = v
			case "sluice_rebalance_last_spread_ratio":
				rebalancer().LastSpread = v
			case "sluice_rebalance_last_pass_seconds":
				rebalancer().LastSeconds = v
			case "sluice_absorb_held_bytes":
				absorb().Held = v
			case "sluice_absorb_held_peak_bytes":
				absorb().Peak = v
			case "sluice_absorb_limit_bytes":
				absorb().Limit = v
			case "sluice_absorb_staged_bytes_total":
				absorb().Staged = v
			case "sluice_absorb_drained_bytes_total":
				absorb().Drained = v
			case "sluice_absorb_pending_segments":
				absorb().Pending = v
			case "sluice_absorb_throttled_writes_total":
				absorb().Throttled = v
			case "sluice_absorb_throttled_seconds_total":
				absorb().ThrottledSeconds = v
			case "sluice_absorb_waiting_writes":
				absorb().Waiting = v
			case "sluice_absorb_rename_errors_total":
				absorb().RenameErrors = v
			case "sluice_absorb_in_memory":
				absorb().InMemory = v != 0
			case "sluice_hsm_restore_leases_total":
				restores().Leases = v
			case "sluice_hsm_restore_takeovers_total":
				restores().Takeovers = v
			case "sluice_hsm_restores_total":
				restores().Restored = v
			case "sluice_hsm_restored_bytes_total":
				restores().RestoredBytes = v
			case "sluice_hsm_released_truncates_total":
				restores().CutToZero = v
			case "sluice_mover_passes_total":
				mover().Passes = v
			case "sluice_mover_moved_files_total":
				if label(m, "action") == "archive" {
					mover().Archived = v
				} else {
					mover().Released = v
				}
			case "sluice_mover_moved_bytes_total":
				if label(m, "action") == "archive" {
					mover().ArchivedBytes = v
				} else {
					mover().ReleasedBytes = v
				}
			case "sluice_mover_failures_total":
				mover().Failures = v
			case "sluice_mover_last_pass_files":
				mover().LastFiles = v
			case "sluice_mover_last_pass_seconds":
				mover().LastSeconds = v
			case "sluice_mover_root_pass_end_timestamp_seconds":
				moverPass(m).End = v
			case "sluice_mover_root_pass_files":
				moverPass(m).Files = v
			case "sluice_mover_root_pass_moved_files":
				if label(m, "action") == "archive" {
					moverPass(m).Archived = v
				} else {
					moverPass(m).Released = v
				}
			case "sluice_mover_root_pass_moved_bytes":
				if label(m, "action") == "archive" {
					moverPass(m).ArchivedBytes = v
				} else {
					moverPass(m).ReleasedBytes = v
				}
			case "sluice_mover_root_pass_failures":
				moverPass(m).Failures = v
			case "sluice_mover_root_pass_seconds":
				moverPass(m).Seconds = v
			case "sluice_stage_hits_total":
				stage(m).Hits = v
			case "sluice_stage_misses_total":
				stage(m).Misses = v
			case "sluice_stage_ahead_bytes_total":
				stage(m).AheadBytes = v
			case "sluice_stage_on_demand_bytes_total":
				stage(m).OnDemandBytes = v
			case "sluice_stage_restored_files_total":
				stage(m).Restored = v
			case "sluice_stage_restored_bytes_total":
				stage(m).RestoredBytes = v
			case "sluice_stage_failures_total":
				stage(m).Failures = v
			case "sluice_stage_running":
				stage(m).Running = v
			case "sluice_stage_depth":
				stage(m).Depth = v
			case "sluice_op_duration_seconds":
				h := m.GetHistogram()
				s.Ops = append(s.Ops, Op{Op: label(m, "op"), Kind: label(m, "kind"), Count: float64(h.GetSampleCount()), Seconds: h.GetSampleSum()})
			case "sluice_op_errors_total":
				s.Errors += v
			case "sluice_client_connections":
				s.Connections = v
			case "sluice_pool_capacity_bytes":
				pool(m).Capacity = v
			case "sluice_pool_used_bytes":
				pool(m).Used = v
			case "sluice_pool_targets":
				pool(m).Targets = v
			case "sluice_target_up":
				tgt(m).Up = v == 1
			case "sluice_target_capacity_bytes":
				tgt(m).Capacity = v
			case "sluice_target_free_bytes":
				tgt(m).Free = v
			case "sluice_target_used_bytes":
				tgt(m).Used = v
			case "sluice_target_chunks":
				tgt(m).Chunks = v
			case "sluice_target_read_bytes_total":
				tgt(m).ReadBytes = v
			case "sluice_target_write_bytes_total":
				tgt(m).WriteBytes = v
			case "sluice_target_read_ops_total":
				tgt(m).ReadOps = v
			case "sluice_target_write_ops_total":
				tgt(m).WriteOps = v
			case "sluice_target_errors_total":
				tgt(m).Errors = v
			case "sluice_target_checksum_failures_total":
				tgt(m).ChecksumFailures = v
			}
		}
	}
	for _, t := range targets {
		s.Targets = append(s.Targets, *t)
	}
	for _, p := range pools {
		s.Pools = append(s.Pools, *p)
	}
	for _, j := range stages {
		s.Stage = append(s.Stage, *j)
	}
	sort.Slice(s.Stage, func(i, j int) bool { return s.Stage[i].Job < s.Stage[j].Job })
	sort.Slice(s.Pools, func(i, j int) bool { return s.Pools[i].Name < s.Pools[j].Name })
	sort.Slice(s.Targets, func(i, j int) bool {
		a, _ := strconv.Atoi(s.Targets[i].ID)
		b, _ := strconv.Atoi(s.Targets[j].ID)
		return a < b
	})
	return s, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Register mounts the dashboard (/) and its data (/api/snapshot) on mux.
func Register(mux *http.ServeMux, mx *metrics.Metrics) {
	sub, _ := fs.Sub(assets, "assets")
	mux.Handle("/", http.FileServerFS(sub))
	mux.HandleFunc("GET /api/snapshot", func(w http.ResponseWriter, _ *http.Request) {
		s, err := Take(mx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(s)
	})
}

// Fetch gets a Snapshot from the admin port at addr (host:port).
func Fetch(ctx context.Context, addr string) (*Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/snapshot", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("dashboard: fetch snapshot from %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("dashboard: fetch snapshot from %s: %s", addr, resp.Status)
	}
	var s Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("dashboard: decode snapshot from %s: %w", addr, err)
	}
	return &s, nil
}
