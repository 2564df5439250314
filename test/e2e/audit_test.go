package e2e

import (
	"context"
	be "encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/kv"
)

// auditLines runs `sluice audit ls --json ARGS` and decodes its lines.
func auditLines(t *testing.T, s *server, args ...string) []audit.JSONEntry {
	t.Helper()
	out := s.mustCLI(append([]string{"audit", "ls", "--json"}, args...)...)
	var es []audit.JSONEntry
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var e audit.JSONEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit ls --json line %q: %v", line, err)
		}
		es = append(es, e)
	}
	return es
}

// TestAuditTrail: changes made through the client library and the CLI of
// a real `sluice serve` show in `sluice audit ls --json` with who made them
// and the old and new values; `sluice audit verify` passes, and after a
// byte of a stored entry is changed in the metadata DB (server stopped),
// fails with exit status 1 naming that entry.
func TestAuditTrail(t *testing.T) {
	s := startServer(t, "")
	c := s.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, c, "/d/a", []byte("a"))
	writeFile(t, c, "/d/b", []byte("b"))
	a, err := c.Stat(ctx, "/d/a")
	if err != nil {
		t.Fatal(err)
	}
	aIno, aMode := a.Attr().Ino, fmt.Sprintf("%04o", a.Mode().Perm())
	if err := c.Chmod(ctx, "/d/a", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Chown(ctx, "/d/a", 123, 456); err != nil {
		t.Fatal(err)
	}
	s.mustCLI("layout", "set", "/d", "--stripe-count", "1")
	s.mustCLI("mv", "/d/b", "/d/a")
	s.mustCLI("rm", "/d/a")

	es := auditLines(t, s)
	var ops []string
	for i, e := range es {
		ops = append(ops, e.Op)
		if e.Seq != uint64(i+1) {
			t.Errorf("entry %d has seq %d", i+1, e.Seq)
		}
		if e.Uid == nil || *e.Uid != uint32(os.Getuid()) || e.Gid == nil || *e.Gid != uint32(os.Getgid()) {
			t.Errorf("entry %d (%s): uid %v gid %v, want this process's %d %d", e.Seq, e.Op, e.Uid, e.Gid, os.Getuid(), os.Getgid())
		}
	}
	if want := []string{"setattr", "setattr", "setlayout", "rename", "unlink"}; !slices.Equal(ops, want) {
		t.Fatalf("audit ls listed %v, want %v", ops, want)
	}
	if m := es[0].Changes["mode"]; m.Old != aMode || m.New != "0600" || es[0].Ino != aIno {
		t.Errorf("chmod entry %+v: want mode %s -> 0600 of inode %d", es[0], aMode, aIno)
	}
	if u, g := es[1].Changes["uid"], es[1].Changes["gid"]; u.New != "123" || g.New != "456" {
		t.Errorf("chown entry %+v: want uid -> 123, gid -> 456", es[1])
	}
	if l := es[2].Changes["layout"]; !strings.Contains(l.New, "stripe_count=1") {
		t.Errorf("layout entry %+v: want the new stripe count 1", es[2])
	}
	if r := es[3]; r.Name != "b" || r.NewName != "a" || r.Replaced != aIno {
		t.Errorf("rename entry %+v: want b -> a replacing inode %d", r, aIno)
	}
	if u := es[4]; u.Name != "a" {
		t.Errorf("unlink entry %+v: want a", u)
	}
	var seqs []uint64
	for _, e := range auditLines(t, s, "--path", "/d/b") {
		seqs = append(seqs, e.Seq)
	}
	if !slices.Equal(seqs, []uint64{4}) {
		t.Errorf("audit ls --path /d/b listed %v, want [4]", seqs)
	}
	if text := s.mustCLI("audit", "ls", "--since", "1h"); strings.Count(text, "\n") != 5 || !strings.Contains(text, `mode="`+aMode+`"->"0600"`) {
		t.Errorf("audit ls --since 1h:\n%s", text)
	}
	if out := s.mustCLI("audit", "verify"); !strings.Contains(out, "intact: 5 entries") {
		t.Errorf("audit verify: %q", out)
	}

	// Tamper with entry 2 in the stopped server's metadata DB.
	s.stop()
	db, err := kv.OpenPebble(filepath.Join(s.dataDir, "meta"), nil)
	if err != nil {
		t.Fatal(err)
	}
	key := be.BigEndian.AppendUint64([]byte("Ae"), 2)
	err = db.Update(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(key)
		if err != nil {
			return err
		}
		v = slices.Clone(v)
		v[len(v)-1] ^= 1
		tx.Set(key, v)
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("tamper with entry 2: %v", err)
	}
	s = startServer(t, s.dataDir)
	r := s.cli("audit", "verify")
	if r.code != 1 || !strings.Contains(r.stderr, "entry 2") || !strings.Contains(r.stdout, "BROKEN at entry 2") {
		t.Fatalf("audit verify after tampering: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
