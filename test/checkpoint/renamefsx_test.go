package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestRandomRenames runs random writes (a create and write, or a small
// file put in one request), renames, removals, reads and
// stats of a few names in a directory under the absorb policy through
// one client with a staging area, and checks every answer against a
// model of what that client did, in order: renames queued behind staged
// files (most of them, as writes drain in the background) must look done
// to this client at once (read-your-renames), and the namespace on the
// targets must end as the model says. The seed is printed;
// SLUICE_FSX_SEED and SLUICE_FSX_OPS replay one (package fsx's plan).
func TestRandomRenames(t *testing.T) {
	addr, other := absorbServer(t)
	plan, err := fsx.PlanFromEnv(300, 51, 52)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range plan.Seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runRandomRenames(t, addr, other, seed, plan.Ops)
		})
	}
}

func runRandomRenames(t *testing.T, addr string, other *client.Client, seed uint64, ops int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := fmt.Sprintf("/ckpt/r%d", seed)
	if err := other.Mkdir(ctx, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	names := []string{"a", "b", "c", "d", "e"}
	model := map[string][]byte{}
	var trace []string // the operations done, for a failure's report
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, op %d: %s (replay: SLUICE_FSX_SEED=%d SLUICE_FSX_OPS=%d); the operations before it:\n%s",
			seed, i, fmt.Sprintf(format, args...), seed, i+1, strings.Join(trace[max(len(trace)-20, 0):], "\n"))
	}
	var counts [5]int
	for i := range ops {
		n := names[r.IntN(len(names))]
		p := path.Join(dir, n)
		switch op := r.IntN(10); {
		case op < 3: // write: staged unless inline (16 KiB and less)
			data := make([]byte, []int{0, 3000, 40 << 10, 300 << 10}[r.IntN(4)]+r.IntN(5000))
			for k := range data {
				data[k] = byte(r.Uint32())
			}
			how := "create"
			if len(data) <= 16<<10 && r.IntN(2) == 0 {
				// A small file in one request (the S3 gateway's and
				// Python's way), replacing what is there.
				how = "put"
				_, err = c.PutFile(ctx, p, data, 0o644, client.PutOptions{})
			} else {
				err = proctest.WriteFile(ctx, c, p, data)
			}
			if err != nil {
				fail(i, "%s %s: %v", how, n, err)
			}
			model[n] = data
			counts[0]++
			trace = append(trace, fmt.Sprintf("%d: %s %s %d bytes", i, how, n, len(data)))
		case op < 6: // rename an existing name
			var have []string
			for k := range model {
				have = append(have, k)
			}
			if len(have) == 0 {
				continue
			}
			slices.Sort(have)
			from := have[r.IntN(len(have))]
			to := names[r.IntN(len(names))]
			if to == from {
				continue
			}
			if err := c.Rename(ctx, path.Join(dir, from), path.Join(dir, to)); err != nil {
				fail(i, "rename %s %s: %v", from, to, err)
			}
			model[to] = model[from]
			delete(model, from)
			counts[1]++
			trace = append(trace, fmt.Sprintf("%d: rename %s %s (%d bytes)", i, from, to, len(model[to])))
		case op < 7: // remove
			err := c.Remove(ctx, p)
			_, had := model[n]
			if had != (err == nil) || (!had && !errors.Is(err, fs.ErrNotExist)) {
				fail(i, "remove %s: %v, the model has it: %v", n, err, had)
			}
			delete(model, n)
			counts[2]++
			trace = append(trace, fmt.Sprintf("%d: remove %s", i, n))
		case op < 9: // read
			got, err := proctest.ReadFile(ctx, c, p)
			want, had := model[n]
			switch {
			case !had && !errors.Is(err, fs.ErrNotExist):
				fail(i, "read %s: %d bytes, %v; the model has no such file", n, len(got), err)
			case had && (err != nil || !bytes.Equal(got, want)):
				fail(i, "read %s: %d bytes (first difference at %d), %v; want %d bytes", n, len(got), firstDiff(got, want), err, len(want))
			}
			counts[3]++
		default: // stat
			fi, err := c.Stat(ctx, p)
			want, had := model[n]
			switch {
			case !had && !errors.Is(err, fs.ErrNotExist):
				fail(i, "stat %s: %v; the model has no such file", n, err)
			case had && (err != nil || fi.Size() != int64(len(want))):
				fail(i, "stat %s: %v; want size %d", n, err, len(want))
			}
			counts[4]++
		}
	}
	st := c.StagingStats()
	if err := c.WaitStaged(ctx); err != nil {
		t.Fatal(err)
	}
	// Another client sees the namespace the model ends with.
	for _, n := range names {
		got, err := proctest.ReadFile(ctx, other, path.Join(dir, n))
		want, had := model[n]
		if had != (err == nil) || !bytes.Equal(got, want) {
			t.Fatalf("seed %d, at the end: %s read by another client: %d bytes, %v; the model has it: %v (%d bytes)", seed, n, len(got), err, had, len(want))
		}
	}
	t.Logf("seed %d: %d ops (%d writes, %d renames of which %d queued, %d removes, %d reads, %d stats): every answer as the model's",
		seed, ops, counts[0], counts[1], st.RenamesQueued, counts[2], counts[3], counts[4])
}
