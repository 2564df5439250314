package fsx

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// LongOps is the number of operations of a long run (SLUICE_FSX_LONG=1).
const LongOps = 1_000_000

// Plan is what the tests that use the exerciser run, read from the
// environment: SLUICE_FSX_SEED=N replays one seed (with SLUICE_FSX_OPS
// operations, to stop right after a failing one); otherwise the fixed
// seeds and one fresh seed (printed) run SLUICE_FSX_OPS operations each
// (default: the caller's), or LongOps with SLUICE_FSX_LONG=1.
// SLUICE_FSX_LAYOUT=I runs the test's layout number I alone (from 0, in
// the order its log lines list them), so that a long run of one layout
// can be replayed or finished on its own. SLUICE_FSX_NO_FALLOCATE=1
// draws no fallocate (Config.NoAllocate): a seed recorded before the
// exerciser drew it (late 2026-12-04) replays as it ran then.
type Plan struct {
	Seeds      []uint64
	Ops        int
	Layout     int  // the one layout to run, or -1 for all
	NoAllocate bool // SLUICE_FSX_NO_FALLOCATE=1
}

// Runs reports whether the plan runs the layout numbered i.
func (p Plan) Runs(i int) bool { return p.Layout < 0 || p.Layout == i }

// PlanFromEnv returns the plan for a test whose own default is ops
// operations on each of the fixed seeds.
func PlanFromEnv(ops int, fixed ...uint64) (Plan, error) {
	p := Plan{Ops: ops, Layout: -1, NoAllocate: os.Getenv("SLUICE_FSX_NO_FALLOCATE") == "1"}
	if v := os.Getenv("SLUICE_FSX_LAYOUT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p, fmt.Errorf("SLUICE_FSX_LAYOUT=%q: want a layout number from 0", v)
		}
		p.Layout = n
	}
	if os.Getenv("SLUICE_FSX_LONG") == "1" {
		p.Ops = LongOps
	}
	if v := os.Getenv("SLUICE_FSX_OPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return p, fmt.Errorf("SLUICE_FSX_OPS=%q: want a positive number", v)
		}
		p.Ops = n
	}
	if v := os.Getenv("SLUICE_FSX_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			return p, fmt.Errorf("SLUICE_FSX_SEED=%q: %v", v, err)
		}
		p.Seeds = []uint64{s}
		return p, nil
	}
	p.Seeds = append(append(p.Seeds, fixed...), FreshSeed())
	return p, nil
}

// FreshSeed returns a new seed from the clock.
func FreshSeed() uint64 { return uint64(time.Now().UnixNano()) }
