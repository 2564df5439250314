package fuse

import (
	"bufio"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestMetaSyncThroughMount checks which operations through the mount ask
// the metadata service to make its changes durable (OpMetaSync, counted by
// the server's metrics): fsync, fdatasync, fsync of a directory and the
// close of a file opened with O_SYNC or O_DSYNC do; a plain create, write
// and close does not (ADR 0006: the default policy makes those durable
// within the sync window, without a sync on the reply's path).
func TestMetaSyncThroughMount(t *testing.T) {
	requireFUSE(t)
	addr, admin := startServerAdmin(t)
	m := startMount(t, addr)
	defer m.stop()

	syncs := func() int { return opCount(t, admin, "meta_sync") }
	step := func(what string, wantSync bool, fn func() error) {
		t.Helper()
		before := syncs()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		after := syncs()
		if got := after > before; got != wantSync {
			t.Errorf("%s: metadata syncs %d -> %d, want a sync: %v", what, before, after, wantSync)
		}
	}

	step("create, write and close", false, func() error {
		return os.WriteFile(m.path("plain"), []byte("x"), 0o644)
	})
	step("mkdir", false, func() error { return os.Mkdir(m.path("d"), 0o755) })
	step("fsync", true, func() error {
		f, err := os.OpenFile(m.path("d", "f"), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write([]byte("data")); err != nil {
			return err
		}
		return f.Sync()
	})
	step("fdatasync", true, func() error {
		f, err := os.OpenFile(m.path("d", "f"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write([]byte("more")); err != nil {
			return err
		}
		return syscall.Fdatasync(int(f.Fd()))
	})
	step("fsync of a directory", true, func() error {
		if err := os.WriteFile(m.path("d", "g"), nil, 0o644); err != nil {
			return err
		}
		d, err := os.Open(m.path("d"))
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	})
	for _, flag := range []struct {
		name string
		bit  int
	}{{"O_SYNC", syscall.O_SYNC}, {"O_DSYNC", syscall.O_DSYNC}} {
		step("create and close with "+flag.name, true, func() error {
			f, err := os.OpenFile(m.path("d", flag.name), os.O_CREATE|os.O_WRONLY|flag.bit, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		})
	}
}

// opCount reads how many requests of metadata op (its metrics name, such
// as "getattr") the server with admin port admin has served.
// startServerAdmin starts `sluice serve` with its admin HTTP endpoint on
// a free loopback port and returns the service's and the endpoint's
// addresses.
func startServerAdmin(t *testing.T) (addr, admin string) {
	t.Helper()
	p, addr := proctest.Start(t, binary, nil, readyLine, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0")
	admin, err := p.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return addr, admin
}

func opCount(t *testing.T, admin, op string) int {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "sluice_op_duration_seconds_count{") && strings.Contains(line, `op="`+op+`"`) {
			f := strings.Fields(line)
			n, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			return int(n)
		}
	}
	return 0
}
