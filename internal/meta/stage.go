package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Staging metrics (docs/tier.md, `sluice stage`): stagers are client
// processes; each reports its run's counts to the metadata service it
// talks to (OpStageReport), which keeps them in the KV, so that they
// survive a restart and are the same on every metadata service of a
// cluster, and exports their sums per job (internal/metrics,
// sluice_stage_*).
//
// Records ("J" keys, docs/format.md):
//   - "J" + job + 0x00 + 's' + stager: a run's totals as it last reported
//     them, its depth, whether it ended, and when it reported;
//   - "J" + job + 0x00 + 'b': the job's base, the totals of the runs
//     folded into it.
//
// A report carries the run's totals so far (StageReportReq.Totals): the
// service records the larger of each count and what it had, so a report
// repeated after a lost answer, or overtaken by a later one, counts once.
// A run whose last report is older than stageFold, ended or not, is
// folded into its job's base at the job's next report (so a late repeat
// of its last report within stageFold still finds its record and counts
// nothing twice).

const (
	// maxStageJobs bounds the jobs kept; reports of further jobs are
	// summed under the job StageOtherJob.
	maxStageJobs = 256
	// StageOtherJob is the job label of the jobs past maxStageJobs.
	StageOtherJob = "_other"
	// stageStale is how long a stager that stopped reporting without
	// saying it ended still counts as running.
	stageStale = 30 * time.Second
	// stageFold is how long a run's record outlives its last report
	// before it is folded into its job's base.
	stageFold = 10 * time.Minute
	// maxStagersPerJob bounds the run records of a job: the oldest are
	// folded first when a new run would exceed it.
	maxStagersPerJob = 64
)

// StageStats are a job's staging sums.
type StageStats struct {
	Job     string
	Counts  wire.StageCounts
	Running int // stagers that reported in the last 30 s and have not ended
	Depth   int // the largest depth of the running stagers
}

var stagePrefix = []byte{pfxStage}

func stageJobPrefix(job string) []byte {
	k := append([]byte{pfxStage}, job...)
	return append(k, 0)
}
func stageBaseKey(job string) []byte { return append(stageJobPrefix(job), 'b') }
func stagerKey(job, stager string) []byte {
	return append(append(stageJobPrefix(job), 's'), stager...)
}

// stagerRecord is a run's record; stageBase uses only Counts.
type stagerRecord struct {
	Counts wire.StageCounts
	Depth  uint32
	Done   bool
	At     int64 // unix ns of the last report
}

const stageRecordVersion = 1

func (r *stagerRecord) Encode(e *wire.Encoder) {
	e.U8(stageRecordVersion)
	r.Counts.Encode(e)
	e.U32(r.Depth)
	e.Bool(r.Done)
	e.I64(r.At)
}

func (r *stagerRecord) Decode(d *wire.Decoder) {
	d.U8() // the version, checked by decodeStager
	r.Counts.Decode(d)
	r.Depth = d.U32()
	r.Done = d.Bool()
	r.At = d.I64()
}

func decodeStager(key, v []byte) (stagerRecord, error) {
	var r stagerRecord
	if len(v) == 0 || v[0] != stageRecordVersion {
		return r, errs.New(errs.Corruption, "meta: staging record %q: unknown version", key)
	}
	if err := wire.Unmarshal(v, &r); err != nil {
		return r, errs.New(errs.Corruption, "meta: staging record %q: %v", key, err)
	}
	return r, nil
}

// maxCounts is the larger of a and b, count by count.
func maxCounts(a, b wire.StageCounts) wire.StageCounts {
	return wire.StageCounts{
		Hits: max(a.Hits, b.Hits), Misses: max(a.Misses, b.Misses),
		BytesAhead: max(a.BytesAhead, b.BytesAhead), BytesOnDemand: max(a.BytesOnDemand, b.BytesOnDemand),
		Restored: max(a.Restored, b.Restored), RestoredBytes: max(a.RestoredBytes, b.RestoredBytes),
		Failed: max(a.Failed, b.Failed),
	}
}

// StageReport records a stager's report in its job's sums.
func (s *Service) StageReport(ctx context.Context, req *wire.StageReportReq) error {
	if len(req.Job) > MaxNameLen || len(req.Stager) > MaxNameLen {
		return errs.New(errs.Invalid, "meta: stage report: job or stager name longer than %d bytes", MaxNameLen)
	}
	if strings.IndexByte(req.Job, 0) >= 0 {
		return errs.New(errs.Invalid, "meta: stage report: job name with a NUL byte")
	}
	now := s.now().UnixNano()
	err := s.update(ctx, func(tx kv.Txn) error {
		job, stager := req.Job, req.Stager
		base, known, err := getStager(tx, stageBaseKey(job))
		if err != nil {
			return err
		}
		if !known {
			n, err := stageJobCount(tx)
			if err != nil {
				return err
			}
			if n >= maxStageJobs {
				// Runs of different jobs may share a name: keep them apart.
				job, stager = StageOtherJob, req.Job+"\x00"+req.Stager
				if base, _, err = getStager(tx, stageBaseKey(job)); err != nil {
					return err
				}
			}
		}
		key := stagerKey(job, stager)
		rec, _, err := getStager(tx, key)
		if err != nil {
			return err
		}
		if req.Totals {
			rec.Counts = maxCounts(rec.Counts, req.Add)
		} else {
			rec.Counts.Add(req.Add)
		}
		rec.Depth, rec.At = req.Depth, now
		rec.Done = rec.Done || req.Done
		tx.Set(key, wire.Marshal(&rec))
		// Fold into the base the job's runs whose last report is older
		// than stageFold (ended or not: a late repeat of an ended run's
		// report must still find its record), and the oldest beyond
		// maxStagersPerJob.
		type run struct {
			key []byte
			rec stagerRecord
		}
		var runs []run
		pfx := append(stageJobPrefix(job), 's')
		var derr error
		err = tx.Scan(pfx, kv.PrefixEnd(pfx), 0, func(k, v []byte) bool {
			if bytes.Equal(k, key) {
				return true
			}
			r, err := decodeStager(k, v)
			if err != nil {
				derr = err
				return false
			}
			runs = append(runs, run{bytes.Clone(k), r})
			return true
		})
		if err == nil {
			err = derr
		}
		if err != nil {
			return err
		}
		sort.Slice(runs, func(a, b int) bool { return runs[a].rec.At < runs[b].rec.At })
		for i, r := range runs {
			quiet := time.Duration(now-r.rec.At) > stageFold
			if quiet || len(runs)-i >= maxStagersPerJob {
				base.Counts.Add(r.rec.Counts)
				tx.Delete(r.key)
			}
		}
		tx.Set(stageBaseKey(job), wire.Marshal(&base))
		return nil
	})
	if err != nil {
		return fmt.Errorf("meta: stage report of job %q: %w", req.Job, err)
	}
	return nil
}

// getStager reads the record at key and whether there is one (a zero
// record if not).
func getStager(tx kv.Txn, key []byte) (stagerRecord, bool, error) {
	v, err := tx.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return stagerRecord{}, false, nil
	}
	if err != nil {
		return stagerRecord{}, false, err
	}
	r, err := decodeStager(key, v)
	return r, err == nil, err
}

// stageJobCount counts the jobs that have a base record.
func stageJobCount(tx kv.Txn) (int, error) {
	n := 0
	err := tx.Scan(stagePrefix, kv.PrefixEnd(stagePrefix), 0, func(k, _ []byte) bool {
		if len(k) >= 3 && k[len(k)-2] == 0 && k[len(k)-1] == 'b' {
			n++
		}
		return true
	})
	return n, err
}

// StageStats returns the staging sums of every job that reported, by job.
// It reads them from the KV; on an error it logs it and returns nil.
func (s *Service) StageStats() []StageStats {
	out, err := s.stageStats(context.Background())
	if err != nil {
		s.log.Warn("staging metrics not read", "err", err)
		return nil
	}
	return out
}

func (s *Service) stageStats(ctx context.Context) ([]StageStats, error) {
	now := s.now().UnixNano()
	var out []StageStats
	err := s.db.View(ctx, func(tx kv.Txn) error {
		out = out[:0]
		byJob := map[string]*StageStats{}
		var derr error
		err := tx.Scan(stagePrefix, kv.PrefixEnd(stagePrefix), 0, func(k, v []byte) bool {
			i := bytes.IndexByte(k[1:], 0)
			if i < 0 || len(k) < i+3 {
				derr = errs.New(errs.Corruption, "meta: staging record key %q", k)
				return false
			}
			job := string(k[1 : 1+i])
			r, err := decodeStager(k, v)
			if err != nil {
				derr = err
				return false
			}
			st := byJob[job]
			if st == nil {
				st = &StageStats{Job: job}
				byJob[job] = st
			}
			st.Counts.Add(r.Counts)
			if k[1+i+1] == 's' && !r.Done && time.Duration(now-r.At) <= stageStale {
				st.Running++
				st.Depth = max(st.Depth, int(r.Depth))
			}
			return true
		})
		if err == nil {
			err = derr
		}
		for _, st := range byJob {
			out = append(out, *st)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Job < out[b].Job })
	return out, nil
}

func (s *Service) registerStage(srv *wire.Server) {
	handle(srv, wire.OpStageReport, func(ctx context.Context, m *wire.StageReportReq) (wire.Message, error) {
		return &wire.Empty{}, s.StageReport(ctx, m)
	})
}
