package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
	"github.com/sluice-fs/sluice/internal/wire"
)

// adminMetrics reads the metrics page of the server at admin.
func adminMetrics(t *testing.T, admin string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// serverOps reads how many requests of each metadata op the server at
// admin served.
func serverOps(t *testing.T, admin string, ops ...string) map[string]int {
	t.Helper()
	body := adminMetrics(t, admin)
	n := make(map[string]int)
	for _, op := range ops {
		m := regexp.MustCompile(`(?m)^sluice_op_duration_seconds_count\{kind="meta",op="` + op + `"\} (\d+)`).FindSubmatch(body)
		if m != nil {
			n[op], _ = strconv.Atoi(string(m[1]))
		}
	}
	return n
}

// TestFlushAttrOlderService: against a metadata service from before
// OpWriteInlineAttr and OpCommitWriteAttr, File.FlushAttr sends the data
// (or its size commit) and the attribute change apart, asks the new op
// only once per client, and the file ends with the bytes and attributes
// it would have had.
func TestFlushAttrOlderService(t *testing.T) {
	s := startServer(t, "", "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	old := proctest.StartOlderService(t, s.addr, wire.OpWriteInlineAttr, wire.OpCommitWriteAttr)
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Server: old.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	direct := s.client()
	mtime := time.Date(2020, 5, 6, 7, 8, 9, 0, time.UTC)
	ch := client.AttrChange{Valid: client.AttrMode | client.AttrMtime, Mode: 0o640, Mtime: mtime.UnixNano()}
	ops := []string{"write_inline", "write_inline_attr", "commit_write", "commit_write_attr", "setattr"}

	for _, tc := range []struct {
		name    string
		size    int
		refused wire.Op
		sent    []string // ops the server must have served for the close
	}{
		{"small", 100, wire.OpWriteInlineAttr, []string{"write_inline", "setattr"}},
		{"small2", 200, wire.OpWriteInlineAttr, []string{"write_inline", "setattr"}},
		{"big", 64 << 10, wire.OpCommitWriteAttr, []string{"commit_write", "setattr"}},
		{"big2", 96 << 10, wire.OpCommitWriteAttr, []string{"commit_write", "setattr"}},
	} {
		data := bytes.Repeat([]byte(tc.name), tc.size/len(tc.name)+1)[:tc.size]
		before := serverOps(t, admin, ops...)
		f, err := c.Create(ctx, "/"+tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		a, err := f.FlushAttr(ctx, ch)
		if err != nil {
			t.Fatalf("%s: FlushAttr: %v", tc.name, err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("%s: close: %v", tc.name, err)
		}
		if a.Size != uint64(tc.size) || a.Mode&0o7777 != 0o640 || a.Mtime != mtime.UnixNano() {
			t.Errorf("%s: FlushAttr returned size %d mode %#o mtime %d; want %d, 0640, %d", tc.name, a.Size, a.Mode, a.Mtime, tc.size, mtime.UnixNano())
		}
		after := serverOps(t, admin, ops...)
		for _, op := range ops {
			want := 0
			for _, s := range tc.sent {
				if s == op {
					want = 1
				}
			}
			if got := after[op] - before[op]; got != want {
				t.Errorf("%s: the server served %d %s requests, want %d", tc.name, got, op, want)
			}
		}
		fi, err := direct.Stat(ctx, "/"+tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != int64(tc.size) || fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(mtime) {
			t.Errorf("%s: another client sees size %d mode %v mtime %v; want %d, 0640, %v", tc.name, fi.Size(), fi.Mode(), fi.ModTime(), tc.size, mtime)
		}
		if got, err := readFile(direct, "/"+tc.name); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: another client read %d bytes (%v), want the %d written", tc.name, len(got), err, len(data))
		}
	}
	// Each new op was asked once, then remembered as not supported.
	for _, op := range []wire.Op{wire.OpWriteInlineAttr, wire.OpCommitWriteAttr} {
		if n := old.Refused(op); n != 1 {
			t.Errorf("op %d was sent %d times to the older service, want once", op, n)
		}
	}
}
