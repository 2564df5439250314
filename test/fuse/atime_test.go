package fuse

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestMountAtime checks access times through mounts: a file whose access
// time is days old, read through a default mount, gets it set to about
// now (relatime; sent by the mount's client in the background, and at the
// latest when the mount stops); the same read through a mount with
// --noatime leaves it as it was. Modification times never change.
func TestMountAtime(t *testing.T) {
	requireFUSE(t)
	srv := startServer(t, "", "")
	c := srv.client()
	ctx := context.Background()
	old := time.Now().Add(-72 * time.Hour).Truncate(time.Second)
	for _, p := range []string{"/relatime", "/noatime"} {
		if err := proctest.WriteFile(ctx, c, p, []byte("read me")); err != nil {
			t.Fatal(err)
		}
		if err := c.Chtimes(ctx, p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	def := startMount(t, srv.addr)
	noatime := startMount(t, srv.addr, "--noatime")
	start := time.Now().Add(-time.Second)
	for m, name := range map[*mount]string{def: "relatime", noatime: "noatime"} {
		if b, err := os.ReadFile(m.path(name)); err != nil || string(b) != "read me" {
			t.Fatalf("read %s: %q, %v", name, b, err)
		}
	}
	// A clean stop sends what the mounts' clients noted.
	def.stop()
	noatime.stop()
	for name, wantNew := range map[string]bool{"/relatime": true, "/noatime": false} {
		fi, err := c.Stat(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		a := fi.Attr()
		switch {
		case !a.Mtime.Equal(old):
			t.Errorf("%s: mtime %v, want %v", name, a.Mtime, old)
		case wantNew && a.Atime.Before(start):
			t.Errorf("%s: atime %v after a read through a default mount; want about now", name, a.Atime)
		case !wantNew && !a.Atime.Equal(old):
			t.Errorf("%s: atime %v after a read through a --noatime mount; want %v", name, a.Atime, old)
		}
	}
}
