package pagecache

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCached checks the answer against the kernel's own state: pages just
// written are cached, pages dropped with POSIX_FADV_DONTNEED (after a
// sync) are not until read again, and a range past the file's end is not.
func TestCached(t *testing.T) {
	if !Supported() {
		if os.Getenv("CI") == "true" {
			t.Fatal("the kernel has no cachestat(2) (CI=true: the tests need Linux 6.5 or later)")
		}
		t.Skip("the kernel has no cachestat(2) (Linux 6.5 or later)")
	}
	f, err := os.CreateTemp(t.TempDir(), "pc")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 1 << 20
	if _, err := f.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	fd := f.Fd()
	if !Cached(fd, 0, size) || !Cached(fd, 4096, 100) {
		t.Fatal("pages just written are not reported cached")
	}
	if Cached(fd, size-4096, 8192) {
		t.Fatal("a range past the end of the file is reported cached")
	}
	if Cached(fd, 0, 0) || Cached(fd, -1, 10) {
		t.Fatal("an empty or negative range is reported cached")
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	// The whole file: the kernel may hold it in folios larger than a
	// page, which a partial drop leaves.
	if err := unix.Fadvise(int(fd), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if Cached(fd, 0, size) || Cached(fd, 0, 4096) {
		t.Fatal("dropped pages are reported cached")
	}
	// Reading the second half brings it (read-ahead goes forward only).
	if _, err := f.ReadAt(make([]byte, size/2), size/2); err != nil {
		t.Fatal(err)
	}
	if !Cached(fd, size/2, size/2) {
		t.Fatal("pages just read are not reported cached")
	}
	if Cached(fd, 0, size) {
		t.Fatal("a range with dropped pages in it is reported cached")
	}
}
