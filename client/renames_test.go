package client

import "testing"

func TestRenameAffects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p, old, new string
		want        bool
	}{
		{"/ckpt/s1/.metadata", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", true},     // the name it makes
		{"/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", true}, // the name it removes
		{"/ckpt/s1/__0_0.distcp", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", false}, // a sibling
		{"/ckpt/s1", "/ckpt/s1/.metadata.tmp", "/ckpt/s1/.metadata", false},              // the parent
		{"/ckpt/step2/x.pt", "/ckpt/tmp2", "/ckpt/step2", true},                          // below a renamed directory
		{"/ckpt/tmp2/x.pt", "/ckpt/tmp2", "/ckpt/step2", true},
		{"/ckpt/step20", "/ckpt/tmp2", "/ckpt/step2", false}, // a prefix of the name only
		{"/a", "", "", false}, // a rename by inode: no paths
	} {
		if got := renameAffects(c.p, c.old, c.new); got != c.want {
			t.Errorf("renameAffects(%q, %q, %q) = %v, want %v", c.p, c.old, c.new, got, c.want)
		}
	}
}
