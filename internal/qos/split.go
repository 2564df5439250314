package qos

import "sort"

// A cluster-wide job limit (`sluice qos set --job J --cluster-rate R`)
// is enforced by the storage nodes' token buckets, each with a share of
// R: the metadata service splits R among the live nodes from what each
// reports the job asked of it in its last heartbeat (SplitLimit), and
// sends each node its share with the heartbeat's reply. Shares follow
// demand within a heartbeat or two.

// MinShareFraction is the part of a cluster-wide limit set aside equally
// for every node before the rest follows demand: a node where the job
// starts (or comes back) serves it at once, at least at this share,
// until its next heartbeat reports the demand.
const MinShareFraction = 0.25

// SplitLimit splits total among nodes by demand (bytes per second each
// node's job asked for; the same order as the result): every node gets
// MinShareFraction*total/len(demand), the rest is given max-min fairly
// (no node above its demand while another below its demand gets less
// than an equal part), and what no demand takes is spread equally, so
// the shares always add up to total.
func SplitLimit(total float64, demand []float64) []float64 {
	n := len(demand)
	if n == 0 || total <= 0 {
		return make([]float64, n)
	}
	floor := MinShareFraction * total / float64(n)
	share := make([]float64, n)
	for i := range share {
		share[i] = floor
	}
	pool := total - floor*float64(n)
	// Wanted beyond the floor, filled from the smallest up.
	want := make([]float64, n)
	order := make([]int, n)
	for i, d := range demand {
		want[i] = max(d-floor, 0)
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return want[order[a]] < want[order[b]] })
	for k, i := range order {
		left := n - k
		give := min(want[i], pool/float64(left))
		share[i] += give
		pool -= give
	}
	// Unwanted: equally to all.
	for i := range share {
		share[i] += pool / float64(n)
	}
	return share
}
