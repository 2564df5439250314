package python

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// inlineMax is the servers' default --inline-max: smaller files go to the
// metadata service in one request, not through staging.
const inlineMax = 16 << 10

// setAbsorb makes dir with the absorb policy on the server at addr.
func setAbsorb(t *testing.T, addr, dir string) {
	t.Helper()
	c := proctest.Client(t, addr)
	ctx := context.Background()
	if err := c.Mkdir(ctx, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetAbsorb(ctx, dir, client.AbsorbOn); err != nil {
		t.Fatal(err)
	}
}

// TestAbsorb: a Python client with a staging directory under the absorb
// policy (DCP through staging, the staging limit, the options).
func TestAbsorb(t *testing.T) {
	needPython(t)
	_, addr := serve(t)
	setAbsorb(t, addr, "/absorb")
	unittest(t, addr, "test_absorb", "SLUICE_ABSORB_DIR=/absorb")
}

// TestAbsorbKill kills (SIGKILL) a Python DCP writer staging under the
// absorb policy after its shards were acknowledged and before its commit,
// while the storage node is paused (nothing drained). The next Python
// client on the staging directory replays the shards, byte for byte (the
// SHA-256 the writer printed), the killed checkpoint was never committed,
// and the one before it loads whole.
func TestAbsorbKill(t *testing.T) {
	needPython(t)
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{Metas: 1, Nodes: 1, TargetsPerNode: 2, Embedded: true, HeartbeatTimeout: 10 * time.Second})
	addr := cl.MetaAddrs()
	setAbsorb(t, addr, "/ckpt")
	stagingEnv := "SLUICE_STAGING_DIR=" + t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(args ...string) []string {
		t.Helper()
		cmd := pythonCmd(ctx, t, addr, append([]string{"absorb_kill.py"}, args...)...)
		cmd.Env = append(cmd.Env, stagingEnv)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("absorb_kill.py %v: %v\n%s", args, err, out)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	stats := func(lines []string) map[string]any {
		t.Helper()
		for _, l := range lines {
			if js, ok := strings.CutPrefix(l, "STATS "); ok {
				var st map[string]any
				if err := json.Unmarshal([]byte(js), &st); err != nil {
					t.Fatal(err)
				}
				return st
			}
		}
		t.Fatalf("no STATS line in %q", lines)
		return nil
	}

	// The previous checkpoint, committed and drained.
	st := stats(run("write", "/ckpt/step1", "1"))
	if st["staged_bytes"].(float64) < 4<<20 || st["held"].(float64) != 0 {
		t.Fatalf("first checkpoint's staging: %v", st)
	}

	// The next one, killed before its commit with nothing drained.
	node := cl.Nodes[0].Proc
	node.Pause(t)
	defer node.Resume()
	cmd := pythonCmd(ctx, t, addr, "absorb_kill.py", "write", "/ckpt/step2", "2", "stop")
	cmd.Env = append(cmd.Env, stagingEnv)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	shards := map[string]string{} // path -> sha256
	staging := 0                  // shards above the inline limit: through staging
	sc := bufio.NewScanner(stdout)
	staged := false
	for !staged && sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "SHARD":
			shards[f[1]] = f[2]
			if n, _ := strconv.Atoi(f[3]); n > inlineMax {
				staging++
			}
		case len(f) == 1 && f[0] == "STAGED":
			staged = true
		}
	}
	if !staged || staging == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the writer did not stage its shards: %d shards\n%s", len(shards), stderr.String())
	}
	reader := proctest.Client(t, addr)
	if _, err := reader.Stat(ctx, "/ckpt/step2/.metadata"); err == nil {
		t.Fatal("step2/.metadata exists before the commit")
	}
	cmd.Process.Kill() // SIGKILL, by PID
	cmd.Wait()
	node.Resume()

	st = stats(run("replay"))
	t.Logf("replay: %v", st)
	if st["adopted"].(float64) != float64(staging) || st["held"].(float64) != 0 {
		t.Fatalf("replay adopted %v records for %d acknowledged shards above %d bytes, %v bytes held after", st["adopted"], staging, inlineMax, st["held"])
	}
	for p, want := range shards {
		data, err := proctest.ReadFile(ctx, reader, p)
		sum := sha256.Sum256(data)
		if err != nil || hex.EncodeToString(sum[:]) != want {
			t.Fatalf("acknowledged shard %s after the replay: %d bytes, %v, sha256 %x, want %s", p, len(data), err, sum, want)
		}
	}
	if _, err := reader.Stat(ctx, "/ckpt/step2/.metadata"); err == nil {
		t.Fatal("the killed checkpoint was committed")
	}
	if out := run("check", "/ckpt/step1", "1"); out[len(out)-1] != "OK" {
		t.Fatalf("previous checkpoint: %q", out)
	}
	if left, _ := os.ReadDir(strings.TrimPrefix(stagingEnv, "SLUICE_STAGING_DIR=") + "/" + reader.FSID()); len(left) != 0 {
		t.Fatalf("staging areas left after the replay: %v", left)
	}
}
