package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/mover"
	"github.com/sluice-fs/sluice/internal/profile"
)

// StageFollowResult is what `sluice stage --follow` did.
type StageFollowResult struct {
	Files, NotReleased int
	Hits, Misses       int   // the readers' first reads of a file: restored before, or not
	BytesAhead         int64 // restored by the stager before a reader came
	BytesOnDemand      int64 // of files a reader reached first
	Depth              int   // the depth at the end
	Restored           int   // files the stager restored
	RestoredBytes      int64 // their bytes
	Failed             int
}

// counts are r's counters, for the staging metrics.
func (r *StageFollowResult) counts() client.StageCounts {
	return client.StageCounts{
		Hits: int64(r.Hits), Misses: int64(r.Misses), BytesAhead: r.BytesAhead, BytesOnDemand: r.BytesOnDemand,
		Restored: int64(r.Restored), RestoredBytes: r.RestoredBytes, Failed: int64(r.Failed),
	}
}

// stageFollow restores the released files of order ahead of the readers
// of job: it records the job (its clients report their reads, docs/
// profile.md), and keeps o.Depth files restored ahead of the furthest file
// the readers have reached, doubling the depth at each miss
// (mover.StageState decides). Past the depth it goes on one file at a
// time, so that readers that stopped do not hold it back. Once every file
// is restored it keeps counting the readers' first reads, and returns when
// they have read every file or read none for o.FollowIdle (10 s). It
// reports its counts as it goes, as a stager of job (stageReporter).
func (e *Env) stageFollow(ctx context.Context, order []string, o StageOptions, job string) (StageFollowResult, error) {
	var res StageFollowResult
	type file struct {
		path string
		ino  uint64
		size int64
	}
	var files []file
	index := map[uint64]int{}
	for i, st := range e.statPaths(ctx, order) {
		p, fi := order[i], st.fi
		if st.err != nil {
			fmt.Fprintf(e.Stderr, "sluice: %v\n", st.err)
			res.Failed++
			continue
		}
		ino := fi.Attr().Ino
		if _, dup := index[ino]; dup || !fi.Mode().IsRegular() {
			continue
		}
		if !fi.Attr().Released {
			res.NotReleased++
			continue
		}
		index[ino] = len(files)
		files = append(files, file{path: p, ino: ino, size: fi.Size()})
	}
	res.Files = len(files)
	depth := max(o.Depth, 1)
	maxDepth := max(o.MaxDepth, depth)
	st := mover.NewStageState(len(files), depth)
	if len(files) == 0 {
		res.Depth = depth
		return res, nil
	}
	name := fmt.Sprintf("stage-%s-%s", sanitizeName(o.Follow), time.Now().UTC().Format("20060102-150405.000"))
	if err := e.Client.ProfileStart(ctx, name, o.Follow, "", 7*24*time.Hour, 0); err != nil {
		return res, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		e.Client.ProfileStop(sctx, name)
		e.Client.ProfileRemove(sctx, name)
	}
	defer stop()
	var mu sync.Mutex // guards st and res from the restores
	rep := e.newStageReporter(job, name, o.ReportEvery)
	report := func(done bool) {
		mu.Lock()
		c, d := res.counts(), st.Depth
		mu.Unlock()
		rep.report(ctx, c, d, done)
	}
	defer report(true)
	fmt.Fprintf(e.Stdout, "following job %s: %d files to stage, %d ahead of its readers\n", o.Follow, len(files), depth)

	done := make(chan int, len(files))
	inFlight := 0
	parallel := max(o.Parallel, 1)
	var after uint64
	lastRead := time.Now() // of the readers' last first read of a file
	idle := o.FollowIdle
	if idle <= 0 {
		idle = 10 * time.Second
	}
	tick := time.NewTicker(o.followPoll())
	defer tick.Stop()
	pace := mover.Pacer{Start: time.Now(), Rate: float64(o.Rate)}
	for {
		// What the readers have read since the last look.
		var err error
		after, err = e.Client.ReadProfileFrom(ctx, name, after, func(p []byte) error {
			b, err := profile.Decode(p)
			if err != nil {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range b.Records {
				i, ok := index[r.Ino]
				if r.Op != profile.OpRead || !ok {
					continue
				}
				hit, first := st.Read(i, r.Start, maxDepth)
				if !first {
					continue
				}
				lastRead = time.Now()
				if hit {
					res.Hits++
					res.BytesAhead += files[i].size
				} else {
					res.Misses++
					res.BytesOnDemand += files[i].size
				}
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		mu.Lock()
		next := st.Next(parallel - inFlight)
		if o.Rate > 0 {
			// --rate: only the restores whose start the cap allows
			// now; the rest wait for a later round.
			now := time.Now()
			k := 0
			for k < len(next) && !pace.Due().After(now) {
				pace.Add(float64(files[next[k]].size))
				k++
			}
			next = next[:k]
		}
		for _, i := range next {
			st.Started[i] = true
		}
		finished := st.Done()
		read := st.AllRead()
		mu.Unlock()
		// Everything restored: go on counting the readers' hits until
		// they have read every file or stopped for a while.
		if finished && inFlight == 0 && (read || time.Since(lastRead) > idle) {
			break
		}
		for _, i := range next {
			inFlight++
			go func() {
				err := e.Client.StageIno(ctx, files[i].ino)
				mu.Lock()
				if err != nil {
					fmt.Fprintf(e.Stderr, "sluice: stage %s: %v\n", files[i].path, err)
					res.Failed++
				} else {
					res.Restored++
					res.RestoredBytes += files[i].size
				}
				st.DoneAt[i] = time.Now().UnixNano() // failed: not retried
				mu.Unlock()
				done <- i
			}()
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-done:
			inFlight--
		case <-tick.C:
		}
		report(false)
	}
	for inFlight > 0 {
		<-done
		inFlight--
	}
	mu.Lock()
	res.Depth = st.Depth
	mu.Unlock()
	return res, nil
}

func (o *StageOptions) followPoll() time.Duration {
	if o.FollowPoll > 0 {
		return o.FollowPoll
	}
	return 200 * time.Millisecond
}

// printFollow prints a --follow run's summary.
func (e *Env) printFollow(r StageFollowResult) error {
	fmt.Fprintf(e.Stdout, "staged %d files; readers' first reads: %d hits, %d misses; %s restored ahead, %s on demand; depth %d; %d not released\n",
		r.Files, r.Hits, r.Misses, human(r.BytesAhead), human(r.BytesOnDemand), r.Depth, r.NotReleased)
	if r.Failed > 0 {
		return errs.New(errs.Unavailable, "stage: %d files failed", r.Failed)
	}
	return nil
}
