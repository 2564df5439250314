package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-fs/sluice/internal/dashboard"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/mover"
)

// Status prints the file system, its storage nodes, its targets with a
// fill bar each and their health, and its replication chains with the
// state of each replica and the progress of resyncs.
func (e *Env) Status(ctx context.Context) error {
	st, err := e.Client.Statfs(ctx)
	if err != nil {
		return err
	}
	ci, err := e.Client.Cluster(ctx)
	if err != nil {
		return err
	}
	ts := ci.Targets
	healthy := 0
	for _, t := range ts {
		if t.Healthy {
			healthy++
		}
	}
	fmt.Fprintf(e.Stdout, "file system %s: %d targets (%d healthy), %s used of %s, %d inodes\n",
		e.Client.FSID(), len(ts), healthy, human(st.Used), human(st.Capacity), st.Inodes)
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	if len(ci.Nodes) > 1 || len(ci.Chains) > 0 {
		fmt.Fprintln(tw, "\nNODE\tADDRESS\tSTATE\tLAST HEARTBEAT")
		for _, n := range ci.Nodes {
			state := "up"
			if !n.Alive {
				state = "DOWN"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\n", n.Name, n.Addr, state, time.Since(n.LastSeen).Round(time.Millisecond))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, "TARGET\tNODE\tADDRESS\tHEALTH\tUSED\tSIZE\tFILL")
	for _, t := range ts {
		health := "healthy"
		if !t.Healthy {
			health = "DOWN"
		}
		if t.Draining {
			health += ",draining"
		}
		fill := 0.0
		if t.Capacity > 0 {
			fill = float64(t.Used) / float64(t.Capacity)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s %3.0f%%\n", t.ID, t.Node, t.Addr, health, human(t.Used), human(t.Capacity), bar(fill, 20), fill*100)
	}
	// Pools: a server without them answers NotSupported.
	ps, err := e.Client.Pools(ctx)
	if err != nil && errs.CodeOf(err) != errs.NotSupported {
		return err
	}
	if len(ps) > 0 {
		fmt.Fprintln(tw)
		printPools(tw, e.poolRows(ps))
	}
	if len(ci.Chains) > 0 {
		fmt.Fprintf(tw, "\nCHAIN\tVERSION\tREPLICAS (write order)\t(table version %d)\n", ci.ChainsVersion)
		for _, ch := range ci.Chains {
			var rs []string
			for _, r := range ch.Replicas {
				rs = append(rs, fmt.Sprintf("%d:%s", r.Target, r.State))
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t\n", ch.ID, ch.Version, strings.Join(rs, " "))
		}
	}
	if lost := unavailableChains(ci); len(lost) > 0 {
		fmt.Fprintf(tw, "\nUNAVAILABLE: chains %v have no serving replica on a live node (sluice damaged / lists their files)\n", lost)
	}
	var resyncs []string
	for _, n := range ci.Nodes {
		for _, r := range n.Resyncs {
			resyncs = append(resyncs, fmt.Sprintf("chain %d v%d: target %d -> %d: %d of %d chunks compared, %d copied",
				r.Chain, r.Version, r.From, r.To, r.Looked, r.Total, r.Copied))
		}
	}
	if len(resyncs) > 0 {
		fmt.Fprintln(tw, "\nRESYNC")
		for _, r := range resyncs {
			fmt.Fprintln(tw, r)
		}
	}
	// The object tier's backends, each tried (docs/tier.md).
	if bs, err := e.Client.TierList(ctx); err == nil && len(bs) > 0 {
		fmt.Fprintln(tw, "\nTIER BACKEND\tENDPOINT\tBUCKET\tSTATE")
		for _, b := range bs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", b.Name, b.Endpoint, b.Bucket, e.tierState(ctx, b.Name))
		}
	}
	// Restores of released files the metadata service granted and
	// committed (a service without the counts answers NotSupported).
	if rt, err := e.Client.RestoreTotals(ctx); err == nil && (rt.Leases > 0 || rt.Restored > 0 || rt.CutToZero > 0) {
		fmt.Fprintln(tw, "\nTIER RESTORES\tSTARTED\tTAKEN OVER\tDONE\tBYTES\tCUT TO 0")
		fmt.Fprintf(tw, "since the metadata service started\t%d\t%d\t%d\t%s\t%d\n", rt.Leases, rt.Takeovers, rt.Restored, human(int64(rt.RestoredBytes)), rt.CutToZero)
	}
	// The tier mover's last pass over the whole tree, if one ran.
	if b, err := e.Client.GetXattr(ctx, "/", mover.StatusXattr); err == nil {
		if r, err := mover.ParsePassRecord(b); err == nil {
			fmt.Fprintln(tw, "\nTIER MOVER\tLAST PASS\tFILES\tARCHIVED\tRELEASED\tFAILED\tTOOK")
			fmt.Fprintf(tw, "%s\t%s ago\t%d\t%d (%s)\t%d (%s)\t%d\t%s\n", r.Host, time.Since(r.At).Round(time.Second), r.Files,
				r.Archived, human(r.ArchivedBytes), r.Released, human(r.ReleasedBytes), r.Failed, r.Took.Round(time.Millisecond))
		}
	}
	return tw.Flush()
}

// bar draws a fill level as a text bar of width cells.
func bar(fill float64, width int) string {
	n := int(fill*float64(width) + 0.5)
	n = min(max(n, 0), width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func human(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	v, suffix := float64(b), []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	i := -1
	for v >= unit && i < len(suffix)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, suffix[i])
}

// TopOptions configure Top.
type TopOptions struct {
	Admin    string        // admin address of the server (host:port)
	Interval time.Duration // between refreshes
	Count    int           // refreshes before returning; 0 = until ctx is done
}

// Top prints live operation rates and throughput of a server, from its
// admin port, every interval. On a terminal it redraws the screen.
func Top(ctx context.Context, w io.Writer, o TopOptions) error {
	prev, err := dashboard.Fetch(ctx, o.Admin)
	if err != nil {
		return err
	}
	redraw := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			redraw = true
		}
	}
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for i := 0; o.Count == 0 || i < o.Count; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur, err := dashboard.Fetch(ctx, o.Admin)
		if err != nil {
			return err
		}
		if redraw {
			fmt.Fprint(w, "\x1b[H\x1b[2J")
		}
		printTop(w, prev, cur)
		prev = cur
	}
	return nil
}

func printTop(w io.Writer, prev, cur *dashboard.Snapshot) {
	dt := cur.Time.Sub(prev.Time).Seconds()
	if dt <= 0 {
		dt = 1
	}
	var rb, wb, rops, wops float64
	before := make(map[string]dashboard.Target)
	for _, t := range prev.Targets {
		before[t.ID] = t
	}
	for _, t := range cur.Targets {
		p := before[t.ID]
		rb += t.ReadBytes - p.ReadBytes
		wb += t.WriteBytes - p.WriteBytes
		rops += t.ReadOps - p.ReadOps
		wops += t.WriteOps - p.WriteOps
	}
	fmt.Fprintf(w, "sluice top  %s  connections %.0f  errors %.0f\n", cur.Time.Format("15:04:05"), cur.Connections, cur.Errors)
	fmt.Fprintf(w, "data: read %s/s (%.0f ops/s)  write %s/s (%.0f ops/s)\n",
		human(int64(rb/dt)), rops/dt, human(int64(wb/dt)), wops/dt)
	type rate struct {
		name      string
		perSec    float64
		meanMicro float64
	}
	prevOps := make(map[string]dashboard.Op)
	for _, op := range prev.Ops {
		prevOps[op.Kind+"/"+op.Op] = op
	}
	var rates []rate
	for _, op := range cur.Ops {
		p := prevOps[op.Kind+"/"+op.Op]
		n := op.Count - p.Count
		if n <= 0 {
			continue
		}
		rates = append(rates, rate{op.Kind + "/" + op.Op, n / dt, (op.Seconds - p.Seconds) / n * 1e6})
	}
	slices.SortFunc(rates, func(a, b rate) int {
		switch {
		case a.perSec > b.perSec:
			return -1
		case a.perSec < b.perSec:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "OP\tOPS/S\tMEAN µs\t")
	for _, r := range rates {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t\n", r.name, r.perSec, r.meanMicro)
	}
	if len(rates) == 0 {
		fmt.Fprintln(tw, "(idle)\t\t\t")
	}
	tw.Flush()
	for _, e := range cur.Recent {
		if e.Time.After(prev.Time) {
			fmt.Fprintf(w, "error: %s %s %s: %s\n", e.Time.Format("15:04:05"), e.Op, e.Class, e.Msg)
		}
	}
}
