package bench_test

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/internal/bench"
)

func smallConfig() bench.Config {
	return bench.Config{Workers: 3, Dir: "/b", EasyTransfer: 64 << 10, EasyBytes: 300 << 10,
		HardRecord: 47008, HardRecords: 4, MDEasyFiles: 10, MDHardFiles: 10, MDHardSize: 3901}
}

// TestBenchNativeLayout runs the write phases natively on Sluice and checks
// what they left in the namespace: counts, sizes, one shared file and one
// shared directory.
func TestBenchNativeLayout(t *testing.T) {
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	cfg := smallConfig()
	cfg.Keep = true
	cfg.Phases = []string{"ior-easy-write", "ior-hard-write", "mdtest-easy-write", "mdtest-hard-write", "find"}
	res, err := bench.Run(ctx, bench.ClientFS{Client: c, Root: "/", Addr: s.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := path.Join("/", res.Workdir)
	easy, err := c.ReadDirAll(ctx, dir+"/ior-easy")
	if err != nil || len(easy) != 3 {
		t.Fatalf("ior-easy: %d files, %v", len(easy), err)
	}
	for _, e := range easy {
		fi, err := c.Stat(ctx, dir+"/ior-easy/"+e.Name)
		if err != nil || fi.Size() != 300<<10 {
			t.Fatalf("%s: %v %v", e.Name, fi.Size(), err)
		}
	}
	fi, err := c.Stat(ctx, dir+"/ior-hard/file")
	if err != nil || fi.Size() != 3*4*47008 {
		t.Fatalf("ior-hard shared file: %v, %v; want %d bytes", fi.Size(), err, 3*4*47008)
	}
	hard, err := c.ReadDirAll(ctx, dir+"/mdtest-hard")
	if err != nil || len(hard) != 30 {
		t.Fatalf("mdtest-hard shared dir: %d files, %v", len(hard), err)
	}
	found := 0
	for _, e := range hard {
		if strings.Contains(e.Name, "01") {
			found++
		}
	}
	if f := res.Phases[4]; f.Found != int64(found) {
		t.Fatalf("find found %d, want %d", f.Found, found)
	}
	for w := range 3 {
		ents, err := c.ReadDirAll(ctx, dir+"/mdtest-easy/dir.000"+string(rune('0'+w)))
		if err != nil || len(ents) != 10 {
			t.Fatalf("mdtest-easy dir %d: %d files, %v", w, len(ents), err)
		}
	}
}

// TestBenchCLI runs `sluice bench --json` natively and on a local
// directory in one command, with every phase.
func TestBenchCLI(t *testing.T) {
	s := startServer(t)
	local := t.TempDir()
	out := s.cli("bench", "--json", "--workers", "2", "--easy-transfer", "64KiB", "--easy-size", "256KiB",
		"--hard-records", "4", "--mdeasy-files", "8", "--mdhard-files", "8",
		"--samples", "32", "--sample-size", "4KiB-16KiB", "--batch", "4", "--steps", "4", "--compute", "2ms",
		"--ckpt-writers", "2", "--ckpt-shard", "512KiB", "sluice:/bench", local)
	var results []bench.Result
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(results) != 2 || !strings.HasPrefix(results[0].FS, "sluice ") || !strings.HasPrefix(results[1].FS, "dir ") {
		t.Fatalf("results for %d targets: %s", len(results), out)
	}
	for _, r := range results {
		if len(r.Phases) != len(bench.Phases) || r.Score == nil || r.Score.Total <= 0 || r.Score.Partial {
			t.Fatalf("%s: %d phases, score %+v", r.FS, len(r.Phases), r.Score)
		}
		if r.Training == nil || r.Training.Utilization <= 0 || r.Checkpoint == nil || r.Checkpoint.Bytes != 1<<20 {
			t.Fatalf("%s: AI phases %+v %+v", r.FS, r.Training, r.Checkpoint)
		}
	}
	// Everything was cleaned up.
	if ents, err := s.client().ReadDirAll(context.Background(), "/bench/sluice-bench"); err != nil || len(ents) != 0 {
		t.Fatalf("left behind on Sluice: %v %v", ents, err)
	}

	// --dir and --keep apply to the AI phases too.
	s.cli("bench", "--no-io500", "--samples", "16", "--sample-size", "4KiB", "--batch", "4", "--steps", "2", "--compute", "1ms",
		"--ckpt-writers", "2", "--ckpt-shard", "256KiB", "--dir", "work/here", "--keep", "sluice:/kept")
	ents, err := s.client().ReadDirAll(context.Background(), "/kept/work/here")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range ents {
		kinds = append(kinds, strings.SplitN(e.Name, "-", 2)[0])
	}
	if strings.Join(kinds, ",") != "ckpt,train" {
		t.Errorf("kept in --dir: %v, want a ckpt-* and a train-* directory", ents)
	}
}

// TestBenchProcs runs the IO500 workers in separate processes, natively
// and on a local directory: every phase runs, the workers ran in as many
// processes as asked (other than this one and the server), each read
// phase checked data written by a worker of another process, and nothing
// is left behind.
func TestBenchProcs(t *testing.T) {
	s := startServer(t)
	local := t.TempDir()
	for _, target := range []string{"sluice:/procs", local} {
		out := s.cli("bench", target, "--json", "--procs", "2", "--workers", "4", "--easy-transfer", "64KiB", "--easy-size", "512KiB",
			"--hard-records", "20", "--mdeasy-files", "20", "--mdhard-files", "20", "--no-train", "--no-checkpoint")
		var res bench.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%s: %v: %s", target, err, out)
		}
		if len(res.WorkerPIDs) != 2 || res.WorkerPIDs[0] == res.WorkerPIDs[1] || res.WorkerPIDs[0] == os.Getpid() {
			t.Errorf("%s: worker processes %v, want 2 distinct", target, res.WorkerPIDs)
		}
		if len(res.Phases) != len(bench.Phases) || res.Score == nil {
			t.Errorf("%s: %d phases, score %v", target, len(res.Phases), res.Score)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(local, "sluice-bench")); len(ents) != 0 {
		t.Errorf("bench left %d entries behind", len(ents))
	}
}
