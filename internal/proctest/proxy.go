package proctest

import (
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/tcpproxy"
)

// The environment that makes a test binary run as a proxy process
// (StartProxy) instead of its tests: the upstream address and the jitter.
const (
	proxyEnv       = "SLUICE_TEST_PROXY_UPSTREAM"
	proxyJitterEnv = "SLUICE_TEST_PROXY_JITTER"
)

var proxyReady = regexp.MustCompile(`proxy on (\S+)`)

// StartProxy runs a tcpproxy to upstream, its pieces jittered by up to
// jitter, in a process of its own (the test binary again, through Main)
// and returns its address; the test's cleanup stops it. The test
// binary's TestMain must be Main or call ProxyChild. Unlike
// tcpproxy.Start, it shares no Go runtime with the test: a test that
// faults on a FUSE mount's mmap in its own process may stop all of its
// goroutines for a garbage collection until the fault ends, which would
// deadlock a proxy the mount's requests pass through.
func StartProxy(tb testing.TB, upstream string, jitter time.Duration) string {
	tb.Helper()
	_, addr := Start(tb, os.Args[0], []string{proxyEnv + "=" + upstream, proxyJitterEnv + "=" + jitter.String()}, proxyReady)
	return addr
}

// ProxyChild runs the proxy process of StartProxy and returns its exit
// code, with true, if this test binary was started as one; a TestMain
// that does not call Main calls it first.
func ProxyChild() (int, bool) {
	up := os.Getenv(proxyEnv)
	if up == "" {
		return 0, false
	}
	return runProxy(up), true
}

// runProxy is the proxy process of StartProxy: it serves until SIGTERM
// (also its parent's death: Start sets it as the process's death signal).
func runProxy(upstream string) int {
	jitter, err := time.ParseDuration(os.Getenv(proxyJitterEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "proctest: proxy jitter: %v\n", err)
		return 2
	}
	p, err := tcpproxy.New(upstream)
	if err != nil {
		fmt.Fprintf(os.Stderr, "proctest: proxy: %v\n", err)
		return 1
	}
	p.SetJitter(jitter)
	fmt.Printf("proxy on %s\n", p.Addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	p.Close()
	return 0
}
