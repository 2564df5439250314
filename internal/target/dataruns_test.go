package target

import (
	"fmt"
	"testing"

	"github.com/sluice-fs/sluice/internal/chunk"
)

// TestDataRuns: a resync sends the blocks of a piece that hold data, in
// runs, and skips those that read as zeros (holes stay holes).
func TestDataRuns(t *testing.T) {
	t.Parallel()
	const B = chunk.BlockSize
	b := make([]byte, 5*B+100)
	b[10] = 1      // block 0
	b[B+7] = 2     // block 1: one run with block 0
	b[3*B+B-1] = 3 // block 3 alone
	b[5*B+99] = 4  // the short last block
	got := fmt.Sprint(dataRuns(b, B))
	want := fmt.Sprint([][2]int{{0, 2 * B}, {3 * B, 4 * B}, {5 * B, 5*B + 100}})
	if got != want {
		t.Fatalf("dataRuns = %s, want %s", got, want)
	}
	if r := dataRuns(make([]byte, 3*B), B); len(r) != 0 {
		t.Fatalf("all zeros: %v", r)
	}
}
