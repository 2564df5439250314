package fuse

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestAuditCaller: changes made through the mount are recorded in the audit
// trail with the uid and gid of the process that made them, not the
// mount's: a chmod and an unlink by uid 1234, a chown by root.
func TestAuditCaller(t *testing.T) {
	requireFUSE(t)
	s := startServer(t, "", "127.0.0.1:0")
	m := startMount(t, s.addr)
	defer m.stop()
	if err := os.Mkdir(m.path("d"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(m.path("d"), 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path("d", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(m.path("d", "f"), 1234, 1234); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(m.path("d", "f"))
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	ens := asUser(t, 1234, 1234,
		helperOp{Op: "chmod", Path: m.path("d", "f"), Mode: 0o600},
		helperOp{Op: "unlink", Path: m.path("d", "f")})
	for i, e := range ens {
		if e != 0 {
			t.Fatalf("op %d as uid 1234: %v", i, e)
		}
	}

	c := proctest.Client(t, s.addr)
	type got struct {
		op       string
		uid, gid uint32
	}
	var entries []got
	for e, err := range c.Audit(context.Background(), client.AuditQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Ino != ino {
			continue // the directory's
		}
		if !e.Who.Known {
			t.Errorf("entry %d (%v) does not say who made it", e.Seq, e.Op)
		}
		entries = append(entries, got{e.Op.String(), e.Who.Uid, e.Who.Gid})
	}
	want := []got{
		{"setattr", 0, 0},       // chown by root
		{"setattr", 1234, 1234}, // chmod
		{"unlink", 1234, 1234},
	}
	if len(entries) != len(want) {
		t.Fatalf("audit entries of inode %d: %+v, want %+v", ino, entries, want)
	}
	for i := range want {
		if entries[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i+1, entries[i], want[i])
		}
	}
}
