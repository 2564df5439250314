package proctest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/kv/etcdtest"
	"github.com/sluice-fs/sluice/internal/wire"
)

// ClusterOptions shape a test cluster. Zero values take the defaults.
type ClusterOptions struct {
	Metas          int // metadata services (default 2)
	Nodes          int // storage nodes (default 3)
	TargetsPerNode int // default 2
	// HeartbeatTimeout of the metadata services (default 2s); the nodes
	// fence themselves after three quarters of it. (Half of it, 1 s, was
	// the nodes' heartbeat period itself: a heartbeat answered a
	// millisecond later than the one before opened a moment in which a
	// node refused chain requests, which failed migrations in CI.)
	HeartbeatTimeout time.Duration
	// ReplaceAfter is the metadata services' --replace-after (0: their
	// default).
	ReplaceAfter time.Duration
	// Embedded makes the metadata service use the embedded engine instead
	// of etcd (Metas must then be 1).
	Embedded bool
	// FirstMetaArgs are extra arguments of the first metadata service
	// (e.g. --rebalance-every).
	FirstMetaArgs []string
	// Host is the address every process listens on (default 127.0.0.1).
	Host string
	// Netns, if set, returns the network namespace to run storage node i
	// in and the address it listens on there ("" for the root namespace
	// and Host). See Netns.
	Netns func(i int) (ns, host string)
	// NodeArgs, if set, returns extra arguments of storage node i (after
	// the harness's own: a flag given again wins, e.g. --listen).
	NodeArgs func(i int) []string
}

// Cluster is a multi-process Sluice cluster on one machine: an etcd server
// in the test process, metadata services (`sluice meta`) and storage nodes
// (`sluice target`) as separate processes, stopped by PID when the test
// ends. Later issues reuse it for anything that needs real nodes.
type Cluster struct {
	tb     testing.TB
	binary string
	opts   ClusterOptions
	Etcd   []string
	Metas  []*Member
	Nodes  []*Member
}

// Member is one process of a Cluster.
type Member struct {
	Proc    *Proc
	Addr    string // the address it serves at
	DataDir string
	Name    string // node name (storage nodes)
	argv    []string
}

var servingRE = regexp.MustCompile(`sluice: serving on (\S+)`)

// StartCluster starts a cluster and waits until every storage node has
// heart-beaten.
func StartCluster(tb testing.TB, binary string, opts ClusterOptions) *Cluster {
	tb.Helper()
	if opts.Metas == 0 {
		opts.Metas = 2
	}
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.TargetsPerNode == 0 {
		opts.TargetsPerNode = 2
	}
	if opts.HeartbeatTimeout == 0 {
		opts.HeartbeatTimeout = 2 * time.Second
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	c := &Cluster{tb: tb, binary: binary, opts: opts}
	dir := tb.TempDir()
	if !opts.Embedded {
		c.Etcd = etcdtest.Start(tb)
	}
	for i := range opts.Metas {
		args := []string{"meta", "--listen", opts.Host + ":0", "--heartbeat-timeout", opts.HeartbeatTimeout.String()}
		if opts.ReplaceAfter > 0 {
			args = append(args, "--replace-after", opts.ReplaceAfter.String())
		}
		if opts.Embedded {
			args = append(args, "--data-dir", filepath.Join(dir, fmt.Sprintf("meta%d", i)))
		} else {
			args = append(args, "--etcd", strings.Join(c.Etcd, ","))
		}
		if i == 0 {
			args = append(args, opts.FirstMetaArgs...)
		}
		m := &Member{argv: args}
		c.start(m)
		c.Metas = append(c.Metas, m)
	}
	for i := range opts.Nodes {
		host := opts.Host
		var argv []string
		if opts.Netns != nil {
			if ns, h := opts.Netns(i); ns != "" {
				argv, host = []string{"ip", "netns", "exec", ns}, h
			}
		}
		m := &Member{Name: fmt.Sprintf("node%d", i+1), DataDir: filepath.Join(dir, fmt.Sprintf("node%d", i+1))}
		m.argv = append(argv, "target", "--listen", host+":0", "--meta", c.MetaAddrs(), "--data-dir", m.DataDir,
			"--node", m.Name, "--targets", strconv.Itoa(opts.TargetsPerNode), "--fence", (opts.HeartbeatTimeout * 3 / 4).String())
		if opts.NodeArgs != nil {
			m.argv = append(m.argv, opts.NodeArgs(i)...)
		}
		c.start(m)
		c.Nodes = append(c.Nodes, m)
	}
	c.WaitHealthy(tb, 30*time.Second)
	return c
}

// start runs (or runs again) a member's process.
func (c *Cluster) start(m *Member) {
	c.tb.Helper()
	bin, args := c.binary, m.argv
	if args[0] == "ip" {
		bin, args = "ip", append(append(slicesClone(args[1:4]), c.binary), args[4:]...)
	}
	m.Proc, m.Addr = Start(c.tb, bin, nil, servingRE, args...)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// MetaAddrs returns the metadata services' addresses, comma-separated, as
// clients take them.
func (c *Cluster) MetaAddrs() string {
	var as []string
	for _, m := range c.Metas {
		as = append(as, m.Addr)
	}
	return strings.Join(as, ",")
}

// Restart starts a stopped member again on the same data dir.
func (c *Cluster) Restart(m *Member) {
	c.tb.Helper()
	select {
	case <-m.Proc.Exited():
	default:
		c.tb.Fatalf("restart of %s: it is still running", m.Name)
	}
	c.start(m)
}

// Info asks the metadata services for the cluster state.
func (c *Cluster) Info(ctx context.Context) (*wire.ClusterInfo, error) {
	var last error
	for _, m := range c.Metas {
		select {
		case <-m.Proc.Exited():
			continue
		default:
		}
		conn, err := wire.Dial(ctx, m.Addr)
		if err != nil {
			last = err
			continue
		}
		var info wire.ClusterInfo
		_, err = conn.Call(ctx, wire.OpCluster, &wire.Empty{}, nil, &info, nil)
		conn.Close()
		if err == nil {
			return &info, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no metadata service answered: %w", last)
}

// WaitHealthy waits until every target is healthy and every chain has all
// its replicas serving.
func (c *Cluster) WaitHealthy(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	if err := c.waitFor(timeout, func(info *wire.ClusterInfo) bool {
		if len(info.Targets) < len(c.Nodes)*c.opts.TargetsPerNode {
			return false
		}
		for _, t := range info.Targets {
			if !t.Healthy {
				return false
			}
		}
		for _, ch := range info.Chains {
			if len(ch.Readers()) != len(ch.Replicas) {
				return false
			}
		}
		return true
	}); err != nil {
		c.logTails(tb)
		tb.Fatalf("cluster not healthy within %v: %v", timeout, err)
	}
}

// logTails logs the last lines of every process's output, for a failure.
func (c *Cluster) logTails(tb testing.TB) {
	tb.Helper()
	for _, m := range append(append([]*Member(nil), c.Metas...), c.Nodes...) {
		lines := strings.Split(strings.TrimSpace(m.Proc.Logs()), "\n")
		tb.Logf("%s %s, last lines:\n%s", m.Name, m.Addr, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// waitFor polls the cluster state until ok returns true.
func (c *Cluster) waitFor(timeout time.Duration, ok func(*wire.ClusterInfo) bool) error {
	deadline := time.Now().Add(timeout)
	var last *wire.ClusterInfo
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last, err = c.Info(ctx)
		cancel()
		if err == nil && ok(last) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("last state: %+v", last)
}

// WaitFor is waitFor for tests.
func (c *Cluster) WaitFor(tb testing.TB, timeout time.Duration, what string, ok func(*wire.ClusterInfo) bool) {
	tb.Helper()
	if err := c.waitFor(timeout, ok); err != nil {
		c.logTails(tb)
		tb.Fatalf("%s: not within %v: %v", what, timeout, err)
	}
}

// Netns is a network namespace joined to the root namespace by a veth
// pair: the root side has HostIP, the namespace side NsIP. Down and Up cut
// and restore the link (a real network cut for processes inside).
type Netns struct {
	Name, HostIP, NsIP string
	hostIf             string
}

var netnsSeq struct {
	sync.Mutex
	n int
}

// NewNetns makes a namespace (root and iproute2 needed: it skips the test
// otherwise, failing it in CI if iproute2 is missing) and removes it when
// the test ends.
func NewNetns(tb testing.TB) *Netns {
	tb.Helper()
	NeedTool(tb, "ip") // iproute2
	netnsSeq.Lock()
	netnsSeq.n++
	n := netnsSeq.n
	netnsSeq.Unlock()
	id := fmt.Sprintf("%d%d", time.Now().UnixNano()%10000, n)
	ns := &Netns{Name: "slc" + id, hostIf: "slh" + id, HostIP: fmt.Sprintf("10.%d.%d.1", 100+n, time.Now().Nanosecond()%250+1)}
	ns.NsIP = strings.TrimSuffix(ns.HostIP, ".1") + ".2"
	nsIf := "sln" + id
	run := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("netns", "add", ns.Name); err != nil {
		tb.Skipf("cannot make a network namespace here: %v", err)
	}
	tb.Cleanup(func() {
		run("link", "del", ns.hostIf)
		run("netns", "del", ns.Name)
	})
	for _, args := range [][]string{
		{"link", "add", ns.hostIf, "type", "veth", "peer", "name", nsIf},
		{"link", "set", nsIf, "netns", ns.Name},
		{"addr", "add", ns.HostIP + "/24", "dev", ns.hostIf},
		{"link", "set", ns.hostIf, "up"},
		{"netns", "exec", ns.Name, "ip", "addr", "add", ns.NsIP + "/24", "dev", nsIf},
		{"netns", "exec", ns.Name, "ip", "link", "set", nsIf, "up"},
		{"netns", "exec", ns.Name, "ip", "link", "set", "lo", "up"},
	} {
		if err := run(args...); err != nil {
			tb.Skipf("cannot link a network namespace here: %v", err)
		}
	}
	return ns
}

// Down cuts the namespace off the network.
func (ns *Netns) Down(tb testing.TB) {
	tb.Helper()
	if out, err := exec.Command("ip", "link", "set", ns.hostIf, "down").CombinedOutput(); err != nil {
		tb.Fatalf("link down: %v: %s", err, out)
	}
}

// Up restores the link.
func (ns *Netns) Up(tb testing.TB) {
	tb.Helper()
	if out, err := exec.Command("ip", "link", "set", ns.hostIf, "up").CombinedOutput(); err != nil {
		tb.Fatalf("link up: %v: %s", err, out)
	}
}
