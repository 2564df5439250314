// Package pagecache asks the kernel whether a file's bytes are in its page
// cache (cachestat(2), Linux 6.5 and later). Senders that pass cached bytes
// to a socket with sendfile(2) use it to keep a cold range, whose sendfile
// would wait for the disk while holding up the connection, on the read path.
package pagecache

import (
	"errors"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// unsupported is set once cachestat(2) failed with ENOSYS (kernels before
// 6.5): Cached then always says no.
var unsupported atomic.Bool

// Cached reports whether every page of [off, off+n) of the file open as fd
// is in the page cache. It is false where the kernel cannot tell (before
// Linux 6.5) and on any error, so a caller that sends only cached ranges
// falls back to reading.
func Cached(fd uintptr, off, n int64) bool {
	if n <= 0 || off < 0 || unsupported.Load() {
		return false
	}
	var cs unix.Cachestat_t
	if err := unix.Cachestat(uint(fd), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, &cs, 0); err != nil {
		if errors.Is(err, unix.ENOSYS) {
			unsupported.Store(true)
		}
		return false
	}
	page := int64(os.Getpagesize())
	return cs.Cache >= uint64((off+n+page-1)/page-off/page)
}

// Supported reports whether the kernel answers cachestat(2).
func Supported() bool {
	if unsupported.Load() {
		return false
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		return false
	}
	defer f.Close()
	var cs unix.Cachestat_t
	err = unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &cs, 0)
	if errors.Is(err, unix.ENOSYS) {
		unsupported.Store(true)
		return false
	}
	return true
}
