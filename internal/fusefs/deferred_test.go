package fusefs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-fs/sluice/client"
)

func TestDeferrable(t *testing.T) {
	base := client.InodeAttr{Mode: 0o100600, Uid: 0, Gid: 0}
	mtime := client.AttrChange{Valid: client.AttrMtime, Mtime: 5}
	for _, c := range []struct {
		name  string
		base  client.InodeAttr
		on    bool
		ch    client.AttrChange
		sized bool
		valid uint32
		want  bool
	}{
		{"explicit mtime starts it", base, false, mtime, false, fuse.FATTR_MTIME, true},
		{"a mode does not start it", base, false, client.AttrChange{Valid: client.AttrMode, Mode: 0o644}, false, fuse.FATTR_MODE, false},
		{"mtime now is never held", base, true, client.AttrChange{Valid: client.AttrMtimeNow}, false, fuse.FATTR_MTIME_NOW, false},
		{"atime now is never held", base, true, client.AttrChange{Valid: client.AttrAtimeNow}, false, fuse.FATTR_ATIME_NOW, false},
		{"a size change is never held", base, true, mtime, true, fuse.FATTR_MTIME | fuse.FATTR_SIZE, false},
		{"wider mode, once on", base, true, client.AttrChange{Valid: client.AttrMode, Mode: 0o644}, false, fuse.FATTR_MODE, true},
		{"narrower mode", client.InodeAttr{Mode: 0o100644}, true, client.AttrChange{Valid: client.AttrMode, Mode: 0o600}, false, fuse.FATTR_MODE, false},
		{"other bits", base, true, client.AttrChange{Valid: client.AttrMode, Mode: 0o066}, false, fuse.FATTR_MODE, false},
		{"set-ID bit added", base, true, client.AttrChange{Valid: client.AttrMode, Mode: 0o4700}, false, fuse.FATTR_MODE, false},
		{"set-ID bit held", client.InodeAttr{Mode: 0o104600}, true, client.AttrChange{Valid: client.AttrMode, Mode: 0o4700}, false, fuse.FATTR_MODE, false},
		{"same owner", base, true, client.AttrChange{Valid: client.AttrUid | client.AttrGid}, false, fuse.FATTR_UID | fuse.FATTR_GID, true},
		{"another owner", base, true, client.AttrChange{Valid: client.AttrUid, Uid: 1000}, false, fuse.FATTR_UID, false},
		{"another group", base, true, client.AttrChange{Valid: client.AttrGid, Gid: 1000}, false, fuse.FATTR_GID, false},
		{"a set-ID bit to clear", client.InodeAttr{Mode: 0o104700}, true, client.AttrChange{Valid: client.AttrUid}, false, fuse.FATTR_UID | fuse.FATTR_KILL_SUIDGID, false},
		{"nothing to clear", base, true, client.AttrChange{Valid: client.AttrUid}, false, fuse.FATTR_UID | fuse.FATTR_KILL_SUIDGID, true},
		{"nothing asked", base, true, client.AttrChange{}, false, 0, false},
	} {
		if got := deferrable(c.base, c.on, c.ch, c.sized, c.valid); got != c.want {
			t.Errorf("%s: deferrable %v, want %v", c.name, got, c.want)
		}
	}
}

func TestApplyChange(t *testing.T) {
	base := client.InodeAttr{Mode: 0o100600, Uid: 1, Gid: 2, Atime: 3, Mtime: 4, Ctime: 5, Size: 6}
	got := applyChange(client.AttrChange{Valid: client.AttrMode | client.AttrMtime, Mode: 0o644, Mtime: 40}, base, 50)
	want := base
	want.Mode, want.Mtime, want.Ctime = 0o100644, 40, 50
	if got.Mode != want.Mode || got.Uid != want.Uid || got.Gid != want.Gid || got.Atime != want.Atime || got.Mtime != want.Mtime || got.Ctime != want.Ctime || got.Size != want.Size {
		t.Fatalf("applyChange: %+v, want %+v", got, want)
	}
}
