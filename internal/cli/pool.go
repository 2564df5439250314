package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// ParseTargetIDs parses target IDs given as arguments (decimal).
func ParseTargetIDs(args []string) ([]uint32, error) {
	var out []uint32
	for _, a := range args {
		v, err := strconv.ParseUint(a, 10, 32)
		if err != nil || v == 0 {
			return nil, errs.New(errs.Invalid, "invalid target ID %q (a positive number, see sluice status)", a)
		}
		out = append(out, uint32(v))
	}
	return out, nil
}

// PoolCreate makes pool name of the targets.
func (e *Env) PoolCreate(ctx context.Context, name string, targets []uint32) error {
	return e.Client.CreatePool(ctx, name, targets...)
}

// PoolAdd adds targets to pool name.
func (e *Env) PoolAdd(ctx context.Context, name string, targets []uint32) error {
	return e.Client.AddToPool(ctx, name, targets...)
}

// PoolRemove takes targets out of pool name, or deletes the pool when no
// targets are given.
func (e *Env) PoolRemove(ctx context.Context, name string, targets []uint32) error {
	if len(targets) == 0 {
		return e.Client.DeletePool(ctx, name)
	}
	return e.Client.RemoveFromPool(ctx, name, targets...)
}

// PoolList prints the pools with their targets, capacity and fill.
func (e *Env) PoolList(ctx context.Context) error {
	ps, err := e.Client.Pools(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	printPools(tw, e.poolRows(ps))
	return tw.Flush()
}

type poolInfo = client.PoolInfo

type poolRow struct {
	name           string
	targets        string
	used, capacity int64
}

func (e *Env) poolRows(ps []poolInfo) []poolRow {
	var rows []poolRow
	for _, p := range ps {
		ts := make([]string, len(p.Targets))
		for i, t := range p.Targets {
			ts[i] = strconv.FormatUint(uint64(t), 10)
		}
		rows = append(rows, poolRow{p.Name, strings.Join(ts, ","), p.Used, p.Capacity})
	}
	return rows
}

func printPools(tw *tabwriter.Writer, rows []poolRow) {
	fmt.Fprintln(tw, "POOL\tTARGETS\tUSED\tSIZE\tFILL")
	for _, r := range rows {
		fill := 0.0
		if r.capacity > 0 {
			fill = float64(r.used) / float64(r.capacity)
		}
		targets := r.targets
		if targets == "" {
			targets = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s %3.0f%%\n", r.name, targets, human(r.used), human(r.capacity), bar(fill, 20), fill*100)
	}
}
