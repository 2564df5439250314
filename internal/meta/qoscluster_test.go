package meta

import (
	"reflect"
	"testing"

	"github.com/sluice-fs/sluice/internal/wire"
)

// TestNodeLimits: a node's limits are its per-target ones plus its share
// of each cluster-wide limit, split by what the job asked of each live
// node, the smaller where a job has both.
func TestNodeLimits(t *testing.T) {
	const mib = 1 << 20
	perTarget := []wire.QosJob{{Job: "a", Rate: 10 * mib, Burst: 10 * mib}, {Job: "z", Rate: 1, Burst: 1}}
	cluster := []wire.QosJob{{Job: "b", Rate: 100 * mib, Burst: 100 * mib}, {Job: "a", Rate: 8 * mib, Burst: 4 * mib}}
	nodes := []string{"n1", "n2"}
	uses := [][]wire.QosUse{
		{{Job: "b", Demand: 500 * mib}, {Job: "a", Demand: 100 * mib}},
		nil, // n2: nothing asked
	}
	for _, tc := range []struct {
		node string
		want []wire.QosJob
	}{
		// b: floors of 12.5 MiB/s, n1 takes the 75 n2 leaves; a: floors
		// of 1, n1 takes the 6 left: 7 MiB/s, under its per-target 10.
		{"n1", []wire.QosJob{{Job: "a", Rate: 7 * mib, Burst: 3.5 * mib}, {Job: "b", Rate: 87.5 * mib, Burst: 87.5 * mib}, {Job: "z", Rate: 1, Burst: 1}}},
		{"n2", []wire.QosJob{{Job: "a", Rate: 1 * mib, Burst: 0.5 * mib}, {Job: "b", Rate: 12.5 * mib, Burst: 12.5 * mib}, {Job: "z", Rate: 1, Burst: 1}}},
		// A node not yet in the list joins it asking nothing: three
		// floors of 100/12 MiB/s, n1 takes the rest.
		{"n3", []wire.QosJob{{Job: "a", Rate: 699050, Burst: 349525}, {Job: "b", Rate: 8738133, Burst: 8738133}, {Job: "z", Rate: 1, Burst: 1}}},
	} {
		got := nodeLimits(perTarget, cluster, tc.node, nodes, uses)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.node, got, tc.want)
		}
	}
	if got := nodeLimits(perTarget, nil, "n1", nodes, uses); !reflect.DeepEqual(got, perTarget) {
		t.Errorf("no cluster limits: %+v, want the per-target ones %+v", got, perTarget)
	}
	if len(nodes) != 2 || len(uses) != 2 {
		t.Error("nodeLimits changed its caller's slices")
	}
}
