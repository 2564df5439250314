package fusefs

import (
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// LocalData gives the mount the data of chunks held by storage targets in
// its own process, for FUSE passthrough (Options.Passthrough).
type LocalData interface {
	// OpenChunkData returns a read-only file whose bytes are exactly the
	// content of chunk (ino, slot) of chain, checked against its
	// checksums, and the chunk's length. It fails with errs.NotSupported
	// or errs.NotFound when the chunk is not held here in that form.
	OpenChunkData(chain uint32, ino uint64, slot uint32) (*os.File, int64, error)
}

// ioMode is how the kernel does a handle's reads and writes.
type ioMode uint8

const (
	// modeCached: through the mount's page cache and our Read/Write.
	modeCached ioMode = iota
	// modePassthrough: the kernel reads the local chunk file itself.
	modePassthrough
)

// errPassthroughBusy refuses a write open of a file open for passthrough
// reading: the kernel wants every open of such an inode to pass through
// too, and a write straight to the chunk file would bypass its checksums.
var errPassthroughBusy = errs.New(errs.Busy, "fuse: the file is open for passthrough reading on this mount")

// ioModes counts an inode's open handles by mode and holds its backing
// file while passthrough handles are open. The kernel allows one backing
// file per inode and no cached open beside a passthrough one; our counts
// drop only when the kernel has released the handle, so they never fall
// below the kernel's own and the choices made from them are safe.
type ioModes struct {
	cached, passthrough int
	backing             int32
	backingFile         *os.File
	// released is closed when passthrough drops to 0 (made when it
	// rises from 0).
	released chan struct{}
}

// passthroughReleaseWait is how long an open that cannot pass through
// waits for the releases of the file's passthrough handles. The kernel
// sends RELEASE after close(2) has returned, so a program that reads a
// file and then opens it for writing would otherwise find it still open
// for passthrough here, and fail with ETXTBSY (TestTwoMountsRandom, seed
// 2611280402, found it).
const passthroughReleaseWait = 2 * time.Second

// awaitReleased waits, with of.modeMu held (and released meanwhile), until
// m has no passthrough handle or passthroughReleaseWait has passed.
func (of *openFile) awaitReleased(m *ioModes) {
	deadline := time.Now().Add(passthroughReleaseWait)
	for m.passthrough > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		ch := m.released
		of.modeMu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		of.modeMu.Lock()
	}
}

// chooseMode picks the I/O mode of a new handle of of and counts it; for a
// passthrough handle it also returns the backing ID.
func (fs *fileSystem) chooseMode(of *openFile, a client.InodeAttr, flags uint32, created bool) (ioMode, int32, error) {
	of.modeMu.Lock()
	defer of.modeMu.Unlock()
	m := &of.modes
	readOnly := flags&syscall.O_ACCMODE == syscall.O_RDONLY
	if m.passthrough > 0 && !(readOnly && !of.written.Load()) {
		of.awaitReleased(m) // handles closed just before, their RELEASE not yet here
	}
	if m.passthrough > 0 {
		if readOnly && !of.written.Load() {
			m.passthrough++
			return modePassthrough, m.backing, nil
		}
		return 0, 0, errPassthroughBusy
	}
	if fs.opts.Passthrough == nil || fs.noPassthrough.Load() || m.cached > 0 || !readOnly || created || of.written.Load() || a.Size == 0 {
		m.cached++
		return modeCached, 0, nil
	}
	f := fs.openBacking(of, a)
	if f == nil {
		m.cached++
		return modeCached, 0, nil
	}
	id, errno := fs.srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(f.Fd())})
	if errno != 0 {
		f.Close()
		if fs.noPassthrough.CompareAndSwap(false, true) {
			fs.log.Warn("fuse: the kernel refused a passthrough file; passthrough is off for this mount", "err", errno)
		}
		m.cached++
		return modeCached, 0, nil
	}
	m.backing, m.backingFile = id, f
	m.released = make(chan struct{})
	m.passthrough++
	return modePassthrough, id, nil
}

// openBacking returns the local file holding all of a's data, or nil.
func (fs *fileSystem) openBacking(of *openFile, a client.InodeAttr) *os.File {
	if !a.AllInChunks() {
		return nil // some bytes live in the metadata (inline data)
	}
	l := of.f.Layout()
	// One chunk holds the whole file: slot 0 holds the first stripe of
	// every row, so with one stripe, or a file within its first stripe,
	// file offsets are chunk offsets.
	if len(l.Chains) == 0 || (l.StripeCount > 1 && int64(a.Size) > l.StripeSize) {
		return nil
	}
	if len(l.Components) > 0 {
		// A progressive layout (ADR 0021): slot 0 is the first
		// component's; the file must lie within that component's range
		// and, unless it has one stripe, within its first stripe.
		c := l.Components[0]
		if int64(a.Size) > c.End || (c.StripeCount > 1 && int64(a.Size) > c.StripeSize) {
			return nil
		}
	}
	data := a.Ino
	if l.Data != 0 {
		data = l.Data // migrated (ADR 0020)
	}
	f, n, err := fs.opts.Passthrough.OpenChunkData(l.Chains[0], data, 0)
	if err != nil {
		switch errs.CodeOf(err) {
		case errs.NotSupported, errs.NotFound:
			if fs.opts.Debug {
				fs.log.Debug("fuse: no passthrough", "ino", a.Ino, "err", err)
			}
		default:
			fs.log.Warn("fuse: no passthrough", "ino", a.Ino, "err", err)
		}
		return nil
	}
	if n != int64(a.Size) {
		// Data beyond the chunk (a hole at the end) or a change in flight.
		f.Close()
		return nil
	}
	return f
}

// endMode uncounts a released handle; the last passthrough handle gives
// the backing file back.
func (fs *fileSystem) endMode(of *openFile, mode ioMode) {
	of.modeMu.Lock()
	defer of.modeMu.Unlock()
	m := &of.modes
	switch mode {
	case modeCached:
		m.cached--
	case modePassthrough:
		if m.passthrough--; m.passthrough == 0 {
			if errno := fs.srv.UnregisterBackingFd(m.backing); errno != 0 {
				fs.log.Warn("fuse: releasing a passthrough file failed", "ino", of.ino, "err", errno)
			}
			m.backingFile.Close()
			m.backing, m.backingFile = 0, nil
			close(m.released)
		}
	}
}
