// Package etcdtest starts in-process etcd servers for tests and local
// clusters: one single-member cluster on loopback, with quiet logging.
//
// Start is what most tests want: a server in a temporary directory,
// stopped when the test ends. StartServer is for harnesses that manage the
// server's life themselves (a local multi-process cluster, a test that
// stops and restarts etcd).
package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Options configures a server started by StartServer.
type Options struct {
	// Dir is the data directory. Required by StartServer; Start and
	// StartServerFor default it to a temporary directory.
	Dir string

	// ClientURL is the URL that clients dial, like
	// "http://127.0.0.1:2379". Empty means a free port on 127.0.0.1.
	ClientURL string

	// PeerURL is the member's raft URL; empty means a free port on
	// 127.0.0.1. A restarted server should get the one it had
	// (Server.PeerURL).
	PeerURL string

	// MaxTxnOps is etcd's --max-txn-ops: the most compares, and the most
	// writes, one transaction may carry. 0 means 10240, far above etcd's
	// default of 128, so that tests are not limited by it; tests of the
	// limit set it.
	MaxTxnOps uint

	// Fsync makes etcd sync its log, as a production etcd does. Off by
	// default: test data need not survive a machine crash, and unsynced
	// commits are much faster.
	Fsync bool

	// Logger receives etcd's own log; nil discards it (etcd logs errors
	// even on a clean shutdown).
	Logger *zap.Logger
}

// Server is a running embedded etcd server.
type Server struct {
	e         *embed.Etcd
	endpoints []string
	peerURL   string
	stopOnce  sync.Once
}

// Endpoints returns the URLs that clients dial.
func (s *Server) Endpoints() []string { return s.endpoints }

// PeerURL returns the member's peer URL, to restart it with.
func (s *Server) PeerURL() string { return s.peerURL }

// Stop stops the server and waits for it. It is idempotent.
func (s *Server) Stop() { s.stopOnce.Do(s.e.Close) }

// StartServer starts a single-member etcd cluster in opts.Dir (creating it,
// or restarting the member stored there) and waits until it serves
// requests.
func StartServer(opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("etcdtest: Options.Dir is required")
	}
	cfg := embed.NewConfig()
	cfg.Name = "sluice-test"
	cfg.Dir = opts.Dir
	cfg.MaxTxnOps = opts.MaxTxnOps
	if cfg.MaxTxnOps == 0 {
		cfg.MaxTxnOps = 10240
	}
	cfg.UnsafeNoFsync = !opts.Fsync
	// A single member elects itself after an election timeout; short ticks
	// make that quick.
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.EnableGRPCGateway = false
	lg := opts.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)

	cu, err := loopbackURL(opts.ClientURL)
	if err != nil {
		return nil, err
	}
	pu, err := loopbackURL(opts.PeerURL)
	if err != nil {
		return nil, err
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: start etcd in %s: %w", opts.Dir, err)
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdtest: etcd in %s failed to start: %w", opts.Dir, err)
	case <-t.C:
		e.Close()
		return nil, fmt.Errorf("etcdtest: etcd in %s not ready after 30s", opts.Dir)
	}
	return &Server{e: e, endpoints: []string{cu.String()}, peerURL: pu.String()}, nil
}

// loopbackURL parses u, or picks a free port on 127.0.0.1 if it is empty.
func loopbackURL(u string) (*url.URL, error) {
	if u != "" {
		p, err := url.Parse(u)
		if err != nil {
			return nil, fmt.Errorf("etcdtest: URL %q: %w", u, err)
		}
		return p, nil
	}
	// embed needs the port in its configuration before it listens, so
	// the port is free when chosen but could be taken before etcd binds
	// it; StartServer then fails.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: find a free port: %w", err)
	}
	defer l.Close()
	return &url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

// Start starts a server in a temporary directory for the test, stops it
// when the test ends, and returns its client endpoints.
func Start(tb testing.TB) (endpoints []string) {
	tb.Helper()
	return StartServerFor(tb, Options{}).Endpoints()
}

// StartServerFor is StartServer for a test: opts.Dir defaults to
// tb.TempDir(), and the server is stopped when the test ends (the test may
// stop it earlier).
func StartServerFor(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	s, err := StartServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}
