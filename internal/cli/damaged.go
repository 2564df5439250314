package cli

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/relayout"
)

// unavailableChains returns the chains that can serve no reads now (see
// placement.Unavailable).
func unavailableChains(ci *client.ClusterInfo) []placement.ChainID {
	healthy := make(map[placement.TargetID]bool, len(ci.Targets))
	var targets []placement.TargetID
	for _, t := range ci.Targets {
		healthy[placement.TargetID(t.ID)] = t.Healthy
		targets = append(targets, placement.TargetID(t.ID))
	}
	return placement.Unavailable(relayout.ChainTable(ci), targets, func(t placement.TargetID) bool { return healthy[t] })
}

// damagedChains returns the chains of a file's layout that hold some of
// its bytes and are in lost (sorted).
func damagedChains(l client.Layout, size int64, lost []placement.ChainID) []uint32 {
	pl := relayout.PlacementOf(l)
	var out []uint32
	for slot, ch := range l.Chains {
		if _, ok := slices.BinarySearch(lost, placement.ChainID(ch)); ok && pl.ChunkSize(slot, size) > 0 && !slices.Contains(out, ch) {
			out = append(out, ch)
		}
	}
	return out
}

// Damaged lists the regular files below root with bytes on chains that can
// serve no reads now (their last serving replica is on a dead node, or
// their one target is down): those files fail to read until a replica
// returns. A small file whose bytes all live in the metadata service may
// be listed although it reads fine.
func (e *Env) Damaged(ctx context.Context, root string) error {
	ci, err := e.Client.Cluster(ctx)
	if err != nil {
		return err
	}
	lost := unavailableChains(ci)
	if len(lost) == 0 {
		fmt.Fprintln(e.Stdout, "every chain has a serving replica on a live node: no damaged files")
		return nil
	}
	fmt.Fprintf(e.Stdout, "chains with no live serving replica: %v\n", lost)
	n := 0
	err = e.Client.Walk(ctx, root, func(p string, fi *client.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		if chs := damagedChains(fi.Attr().Layout, fi.Size(), lost); len(chs) > 0 {
			n++
			fmt.Fprintf(e.Stdout, "%s\tchains %v\n", p, chs)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "%d damaged files below %s\n", n, root)
	return nil
}
