package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestRandomRenames runs fsx.RunNames (random writes, small files put in
// one request, renames of existing names, removals, reads and stats of a
// few names, every answer checked against a model) in a directory under
// the absorb policy through one client with a staging area: renames
// queued behind staged files (most of them, as writes drain in the
// background) must look done to this client at once (read-your-renames),
// and another client must see the model's namespace at the end. The seed
// is printed; SLUICE_FSX_SEED and SLUICE_FSX_OPS replay one.
func TestRandomRenames(t *testing.T) {
	addr, other := absorbServer(t)
	plan, err := fsx.PlanFromEnv(300, 51, 52)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "b", "c", "d", "e"}
	for _, seed := range plan.Seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := fmt.Sprintf("/ckpt/r%d", seed)
			ctx, c := stagingClient(t, addr, other, dir)
			model, counts, err := fsx.RunNames(fsx.ClientNames{C: c, Dir: dir, Ctx: ctx}, names, seed, plan.Ops)
			if err != nil {
				t.Fatal(err)
			}
			queued := c.StagingStats().RenamesQueued
			if err := c.WaitStaged(ctx); err != nil {
				t.Fatal(err)
			}
			checkNames(ctx, t, other, dir, names, model)
			t.Logf("seed %d: %d ops %+v, %d renames queued behind staged files: every answer as the model's", seed, plan.Ops, counts, queued)
		})
	}
}

// stagingClient makes directory dir (under the absorb policy) through
// other and returns a client of addr with a staging area, closed at the
// end of the test, and a context for the run.
func stagingClient(t *testing.T, addr string, other *client.Client, dir string) (context.Context, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	if err := other.Mkdir(ctx, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, client.Options{Server: addr, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c
}

// checkNames checks that c reads the model's files in dir, and no others
// of names.
func checkNames(ctx context.Context, t *testing.T, c *client.Client, dir string, names []string, model map[string][]byte) {
	t.Helper()
	for _, n := range names {
		got, err := proctest.ReadFile(ctx, c, path.Join(dir, n))
		want, had := model[n]
		if had != (err == nil) || !bytes.Equal(got, want) {
			t.Fatalf("at the end: %s read by another client: %d bytes, %v; the model has it: %v (%d bytes)", n, len(got), err, had, len(want))
		}
	}
}

// TestRandomTree runs fsx.RunTree (RunNames with directories: files
// written, renamed and removed in a directory and in directories below
// it, directories made, removed and renamed, as a checkpoint committed by
// renaming its directory is) under the absorb policy through one client
// with a staging area: its lookups by path and its listings must show
// its queued renames done, and another client must see the model's files
// once the client drained. SLUICE_FSX_SEED and SLUICE_FSX_OPS replay one.
func TestRandomTree(t *testing.T) {
	addr, other := absorbServer(t)
	plan, err := fsx.PlanFromEnv(400, 53, 54)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range plan.Seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := fmt.Sprintf("/ckpt/t%d", seed)
			ctx, c := stagingClient(t, addr, other, dir)
			files, counts, err := fsx.RunTree(fsx.ClientNames{C: c, Dir: dir, Ctx: ctx}, seed, plan.Ops)
			if err != nil {
				t.Fatal(err)
			}
			queued := c.StagingStats().RenamesQueued
			if err := c.WaitStaged(ctx); err != nil {
				t.Fatal(err)
			}
			if st := c.StagingStats(); st.LastErrors != 0 {
				t.Fatalf("staging %+v: a queued rename failed", st)
			}
			proctest.CheckTree(ctx, t, other, dir, files)
			t.Logf("seed %d: %d ops %+v, %d renames queued behind staged files: every answer as the model's", seed, plan.Ops, counts, queued)
		})
	}
}

// TestRandomTreeTwoClients runs fsx.RunTree through two staging clients
// at once, each in a directory of its own under the policy: one
// client's staged files and queued renames must not change what the
// other sees (a rename is refused for staged files in its own scope
// only), and another client must then read both models' files.
func TestRandomTreeTwoClients(t *testing.T) {
	addr, other := absorbServer(t)
	plan, err := fsx.PlanFromEnv(300, 55)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range plan.Seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			type result struct {
				dir   string
				files map[string][]byte
				err   error
			}
			results := make(chan result, 2)
			for k := range uint64(2) {
				dir := fmt.Sprintf("/ckpt/two%d-%d", seed, k)
				ctx, c := stagingClient(t, addr, other, dir)
				go func() {
					files, _, err := fsx.RunTree(fsx.ClientNames{C: c, Dir: dir, Ctx: ctx}, seed+k, plan.Ops)
					if err == nil {
						err = c.WaitStaged(ctx)
					}
					results <- result{dir, files, err}
				}()
			}
			for range 2 {
				r := <-results
				if r.err != nil {
					t.Fatalf("%s: %v", r.dir, r.err)
				}
				proctest.CheckTree(context.Background(), t, other, r.dir, r.files)
			}
			t.Logf("seed %d: two clients, %d ops each: every answer as their models'", seed, plan.Ops)
		})
	}
}
