package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sluice-fs/sluice/internal/bench"
)

func newBench(g *globals) *cobra.Command {
	s := bench.Suite{IO500: bench.DefaultConfig()}
	tc := bench.DefaultTrainingConfig()
	cc := bench.DefaultCheckpointConfig()
	var (
		phases                                 []string
		easyTransfer, easyBytes, ckptShard     string
		ckptSize                               string
		sampleSize                             string
		jsonOut, noIO500, noTrain, noCkpt, bar bool
		procs                                  int
	)
	cmd := &cobra.Command{
		Use:         "bench [DIR | sluice:PATH]...",
		Annotations: map[string]string{annotGC: "program"},
		Short:       "Benchmark file systems: IO500 phases, AI training emulation, checkpoint",
		Long: "bench runs phases modelled on IO500 (ior-easy, ior-hard, mdtest-easy, mdtest-hard,\n" +
			"find), a training emulation in the spirit of MLPerf Storage and a checkpoint/restore\n" +
			"on each target in turn: a local directory (a Sluice mount, a local disk, any file\n" +
			"system) or sluice:PATH, natively through the client library on --server. With no\n" +
			"target it runs natively on sluice:/. With several it also prints their ratios to\n" +
			"the first. Every phase prints its parameters; all are flags.",
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			parse := func(dst *int64, v, name string) {
				if err == nil {
					if *dst, err = bench.ParseSize(v); err != nil {
						err = fmt.Errorf("%w: --%s: %v", errUsage, name, err)
					}
				}
			}
			parse(&s.IO500.EasyTransfer, easyTransfer, "easy-transfer")
			parse(&s.IO500.EasyBytes, easyBytes, "easy-size")
			parse(&cc.ShardSize, ckptShard, "ckpt-shard")
			if ckptSize != "" {
				parse(&cc.TotalSize, ckptSize, "ckpt-size")
			}
			if err != nil {
				return err
			}
			if tc.SampleSize, err = bench.ParseSizeDist(sampleSize); err != nil {
				return fmt.Errorf("%w: --sample-size: %v", errUsage, err)
			}
			s.IO500.Phases, s.SkipIO500 = phases, noIO500
			// --dir and --keep apply to every phase.
			tc.Dir, cc.Dir = s.IO500.Dir, s.IO500.Dir
			tc.Keep, cc.Keep = s.IO500.Keep, s.IO500.Keep
			if !noTrain {
				s.Training = &tc
			}
			if !noCkpt {
				s.Checkpoint = &cc
			}
			if bar || (!jsonOut && term.IsTerminal(int(os.Stderr.Fd()))) {
				s.IO500.Progress = bench.ProgressBar(os.Stderr)
			}
			if len(args) == 0 {
				args = []string{"sluice:/"}
			}
			var results []*bench.Result
			if procs < 0 || procs > s.IO500.Workers {
				return fmt.Errorf("%w: --procs must be between 0 and --workers (%d)", errUsage, s.IO500.Workers)
			}
			for _, a := range args {
				fsys, done, err := benchFS(cmd.Context(), g, a)
				if err != nil {
					return err
				}
				defer done()
				s.IO500.Pool = nil
				if procs > 1 {
					s.IO500.Pool = func(ctx context.Context, runDir string) (bench.WorkerPool, error) {
						return startWorkerProcs(ctx, g, a, s.IO500, runDir, procs)
					}
				}
				res, err := bench.RunSuite(cmd.Context(), fsys, s)
				if err != nil {
					return err
				}
				results = append(results, res)
				if !jsonOut {
					if err := bench.WriteTable(os.Stdout, res); err != nil {
						return err
					}
					fmt.Println()
				}
			}
			if jsonOut {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				if len(results) == 1 {
					return enc.Encode(results[0])
				}
				return enc.Encode(results)
			}
			return bench.WriteComparison(os.Stdout, results)
		},
	}
	f := cmd.Flags()
	c := &s.IO500
	f.IntVarP(&c.Workers, "workers", "w", c.Workers, "parallel workers")
	f.IntVar(&procs, "procs", 0, "run the IO500 workers in this many processes (0 or 1: goroutines of this process)")
	f.StringSliceVar(&phases, "phases", nil, "IO500 phases to run, by name or prefix (default all: "+strings.Join(bench.Phases, ",")+")")
	f.StringVar(&c.Dir, "dir", c.Dir, "working directory inside each target (each run makes and removes its own subdirectory)")
	f.StringVar(&easyTransfer, "easy-transfer", bench.Size(c.EasyTransfer).String(), "ior-easy transfer size")
	f.StringVar(&easyBytes, "easy-size", bench.Size(c.EasyBytes).String(), "ior-easy bytes per worker")
	f.Int64Var(&c.HardRecord, "hard-record", c.HardRecord, "ior-hard record size in bytes")
	f.IntVar(&c.HardRecords, "hard-records", c.HardRecords, "ior-hard records per worker")
	f.IntVar(&c.MDEasyFiles, "mdeasy-files", c.MDEasyFiles, "mdtest-easy files per worker")
	f.IntVar(&c.MDHardFiles, "mdhard-files", c.MDHardFiles, "mdtest-hard files per worker")
	f.Int64Var(&c.MDHardSize, "mdhard-size", c.MDHardSize, "mdtest-hard file size in bytes")
	f.BoolVar(&c.Keep, "keep", false, "keep the files written (for inspection)")
	f.BoolVar(&noIO500, "no-io500", false, "skip the IO500 phases")
	f.BoolVar(&noTrain, "no-train", false, "skip the training emulation")
	f.BoolVar(&noCkpt, "no-checkpoint", false, "skip the checkpoint phase")
	f.IntVar(&tc.Accelerators, "accelerators", tc.Accelerators, "training: simulated accelerators")
	f.IntVar(&tc.Samples, "samples", tc.Samples, "training: files in the data set")
	f.StringVar(&sampleSize, "sample-size", tc.SampleSize.String(), "training: sample size, SIZE or MIN-MAX (uniform); e.g. 150KiB images, 140MiB UNet3D volumes")
	f.IntVar(&tc.BatchSize, "batch", tc.BatchSize, "training: samples per batch")
	f.IntVar(&tc.ReaderThreads, "readers", tc.ReaderThreads, "training: loader threads per accelerator")
	f.IntVar(&tc.Prefetch, "prefetch", tc.Prefetch, "training: batches a loader may read ahead")
	f.DurationVar(&tc.Compute, "compute", tc.Compute, "training: compute time per batch")
	f.IntVar(&tc.Steps, "steps", tc.Steps, "training: batches per accelerator")
	f.StringVar(&tc.Dataset, "dataset", "", "training: read the files of this existing directory of each target (e.g. a data set released to the object tier) instead of writing a data set; --samples and --sample-size are then ignored")
	f.IntVar(&tc.Epochs, "epochs", 0, "training: read the whole data set this many times (replaces --steps)")
	f.BoolVar(&tc.FindMax, "find-max", false, "training: find the most accelerators kept at --min-util")
	f.Float64Var(&tc.MinUtilization, "min-util", tc.MinUtilization, "training: utilization --find-max must keep")
	f.IntVar(&cc.Writers, "ckpt-writers", cc.Writers, "checkpoint: writers (one shard each)")
	f.StringVar(&ckptShard, "ckpt-shard", bench.Size(cc.ShardSize).String(), "checkpoint: bytes per shard")
	f.StringVar(&ckptSize, "ckpt-size", "", "checkpoint: total bytes, split over the writers (overrides --ckpt-shard)")
	f.BoolVar(&cc.ColdRestore, "ckpt-cold-restore", false, "checkpoint: drop the machine's page cache before the restore (root only), so that it reads from the disks")
	qosFlags(cmd, &g.qosJob, &g.qosClass)
	f.StringVar(&g.stagingDir, "staging-dir", "", "sluice:PATH targets: stage files under a directory with the absorb policy here (docs/checkpoint.md)")
	f.Var(sizeValue{&g.stagingReserve}, "staging-reserve", "sluice:PATH targets: "+stagingReserveHelp)
	f.Var(sizeValue{&g.stagingMax}, "staging-max", "sluice:PATH targets: "+stagingMaxHelp)
	f.BoolVar(&jsonOut, "json", false, "print the results as JSON")
	f.BoolVar(&bar, "progress", false, "show a progress bar even when stderr is not a terminal")
	return cmd
}
