package proctest

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ChunkSpace sums the bytes the file system holds (st_blocks) for the
// chunk data files of the inodes inos (their data IDs) under the data
// directories dirs: what a punch or a resync that keeps holes saves.
func ChunkSpace(t testing.TB, dirs []string, inos ...uint64) int64 {
	t.Helper()
	prefixes := make([]string, len(inos))
	for i, ino := range inos {
		prefixes[i] = fmt.Sprintf("%016x.", ino)
	}
	var sum int64
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".dat") {
				return err
			}
			for _, pre := range prefixes {
				if strings.HasPrefix(d.Name(), pre) {
					var st syscall.Stat_t
					if err := syscall.Stat(p, &st); err != nil {
						return err
					}
					sum += st.Blocks * 512
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return sum
}
