package fusefs

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/profile"
)

// Mounted is a mounted Sluice file system being served.
type Mounted struct {
	fs         *fileSystem
	srv        *fuse.Server
	mountpoint string
	dev        uint64 // st_dev of the mount: names its FUSE connection

	cancel context.CancelFunc // stops the heartbeat and in-flight operations
	wg     sync.WaitGroup     // the heartbeat and serve goroutines
	done   chan struct{}      // closed when serving ended (unmounted)

	once sync.Once
	err  error
}

// Run connects to opts.Server, mounts the file system on opts.Mountpoint,
// calls opts.Ready, and serves until ctx is done (then unmounts cleanly:
// open files are written back first) or the file system is unmounted from
// outside (sluice umount, fusermount3 -u).
func Run(ctx context.Context, opts Options) error {
	if opts.Server == "" {
		return errs.New(errs.Invalid, "mount: no server address given")
	}
	if err := opts.setDefaults(); err != nil {
		return err
	}
	copts := opts.Client
	copts.Server = opts.Server
	copts.Via = profile.ViaMount
	if copts.FlushTimeout == 0 {
		// Written-back data is bounded like every other operation.
		copts.FlushTimeout = opts.OpTimeout
	}
	c, err := client.New(ctx, copts)
	if err != nil {
		return err
	}
	defer c.Close()
	if opts.Started != nil {
		opts.Started(c)
	}
	m, err := Mount(ctx, c, opts)
	if err != nil {
		return err
	}
	if opts.Ready != nil {
		opts.Ready()
	}
	select {
	case <-ctx.Done():
	case <-m.Done():
	}
	uctx, cancel := context.WithTimeout(context.Background(), 2*m.fs.opts.OpTimeout)
	defer cancel()
	return m.Unmount(uctx)
}

// Mount mounts the file system c is connected to on opts.Mountpoint and
// serves it in the background until Unmount, or until it is unmounted from
// outside (Done). c must stay open until then.
func Mount(ctx context.Context, c *client.Client, opts Options) (*Mounted, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if opts.PassthroughLocal && opts.Passthrough == nil {
		opts.Passthrough = c // the chunk files from the direct-read sockets
	}
	if root := c.RootIno(); root != rootIno {
		return nil, errs.New(errs.NotSupported, "mount: the file system's root is inode %d; FUSE needs %d", root, rootIno)
	}
	mp, err := filepath.Abs(opts.Mountpoint)
	if err != nil {
		return nil, fmt.Errorf("mount: %w", err)
	}
	if st, err := os.Stat(mp); err != nil {
		return nil, fmt.Errorf("mount: %w", err)
	} else if !st.IsDir() {
		return nil, errs.New(errs.NotDir, "mount: %s is not a directory", mp)
	}

	if c.StagingStats().InMemory {
		opts.Logger.Warn("the staging directory is on a memory file system: files under the absorb policy are acknowledged before they reach the targets, and a restart of this machine loses what has not drained yet (a kill of this process does not)")
	}
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	fs := newFileSystem(mctx, c, &opts)
	sctx, scancel := context.WithTimeout(ctx, opts.OpTimeout)
	fs.orphans, err = setupOrphans(sctx, c, opts.OrphanGrace, opts.Logger)
	scancel()
	if err != nil {
		cancel()
		return nil, err
	}

	root := os.Geteuid() == 0
	mo := &fuse.MountOptions{
		AllowOther: *opts.AllowOther,
		// The metadata service does not check permissions: the kernel does.
		Options:       []string{"default_permissions"},
		FsName:        "sluice:" + opts.Server,
		Name:          "sluice",
		MaxWrite:      opts.MaxWrite,
		MaxReadAhead:  opts.MaxWrite,
		MaxBackground: 64,
		// Asked on every write (to drop file capabilities); we store none.
		IgnoreSecurityLabels: true,
		// Pages are invalidated at open when the file changed elsewhere,
		// not whenever the kernel sees a new mtime: our own writes would
		// otherwise drop the cache they just filled.
		ExplicitDataCacheControl: true,
		// Reads answer with bytes (ReadResultData), never a file to
		// splice from; go-fuse would still try a splice first, costing
		// three system calls per read before falling back to writev.
		DisableSplice: true,
		DirectMount:   root,
		Debug:         opts.Debug,
		Logger:        log.New(&slogWriter{opts.Logger}, "", 0),
	}
	// The mount clears set-ID bits itself (setid.go): spares a GETXATTR
	// before every write.
	mo.ExtraCapabilities |= fuse.CAP_HANDLE_KILLPRIV_V2
	// Shared mmap of an open read around the page cache (FOPEN_DIRECT_IO,
	// attrs.go) works as of any other.
	mo.ExtraCapabilities |= fuse.CAP_DIRECT_IO_ALLOW_MMAP
	if opts.WritebackCache {
		mo.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
	}
	srv, err := fuse.NewServer(fs, mp, mo)
	if err != nil {
		fs.orphans.close(context.WithoutCancel(sctx))
		cancel()
		return nil, fmt.Errorf("mount %s: %w", mp, err)
	}
	m := &Mounted{fs: fs, srv: srv, mountpoint: mp, cancel: cancel, done: make(chan struct{})}
	m.wg.Go(func() {
		srv.Serve()
		close(m.done)
	})
	if err := srv.WaitMount(); err != nil {
		m.Unmount(ctx)
		return nil, fmt.Errorf("mount %s: %w", mp, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(mp, &st); err == nil {
		m.dev = st.Dev
	}
	if root && opts.ReadAheadKB > 0 {
		m.setReadAhead(opts.ReadAheadKB)
	}
	m.wg.Go(func() { m.heartbeat(mctx) })
	if opts.WatchTimeout > 0 {
		m.wg.Go(func() { fs.follow(mctx) })
	}
	return m, nil
}

// Mountpoint returns the absolute path the file system is mounted on.
func (m *Mounted) Mountpoint() string { return m.mountpoint }

// Done is closed when the file system has been unmounted and serving ended.
func (m *Mounted) Done() <-chan struct{} { return m.done }

// Unmount writes back the open files' data and unmounts. If programs still
// use the mount, it is detached lazily and its FUSE connection aborted
// (their calls fail with ENOTCONN): the process can then exit cleanly.
// Unmount is idempotent and also cleans up after an unmount from outside.
func (m *Mounted) Unmount(ctx context.Context) error {
	m.once.Do(func() { m.err = m.unmount(ctx) })
	return m.err
}

func (m *Mounted) unmount(ctx context.Context) error {
	log := m.fs.log
	select {
	case <-m.done:
	default:
		m.fs.flushAll(ctx)
		if err := m.srv.Unmount(); err != nil {
			log.Warn("fuse: unmount failed; detaching lazily", "mountpoint", m.mountpoint, "err", err)
			if err := lazyUnmount(m.mountpoint); err != nil {
				log.Warn("fuse: lazy unmount failed", "mountpoint", m.mountpoint, "err", err)
			}
			if !m.abort() {
				// Without fusectl the connection ends when this process
				// exits and closes /dev/fuse: do not wait for serving to end.
				m.cancel()
				return nil
			}
		}
	}
	var err error
	select {
	case <-m.done:
	case <-ctx.Done():
		err = fmt.Errorf("unmount %s: serving did not end: %w", m.mountpoint, ctx.Err())
	}
	m.cancel() // stop the heartbeat and the change feed
	if err == nil {
		m.wg.Wait()
	}
	// Every handle is gone: free what was unlinked while open.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.fs.opts.OpTimeout)
	defer cancel()
	if cerr := m.fs.orphans.close(cctx); cerr != nil {
		log.Warn("fuse: freeing unlinked files failed", "err", cerr)
	}
	return err
}

// abort ends the FUSE connection through fusectl (mounting it if needed,
// as root), so that serving stops even while programs hold files open on a
// lazily detached mount. It reports whether it could.
func (m *Mounted) abort() bool {
	if m.dev == 0 {
		return false
	}
	const ctl = "/sys/fs/fuse/connections"
	p := fmt.Sprintf("%s/%d/abort", ctl, unix.Minor(m.dev))
	if _, err := os.Stat(p); err != nil && os.Geteuid() == 0 {
		syscall.Mount("fusectl", ctl, "fusectl", 0, "")
	}
	if err := os.WriteFile(p, []byte("1"), 0); err != nil {
		m.fs.log.Warn("fuse: aborting the connection failed", "path", p, "err", err)
		return false
	}
	return true
}

// setReadAhead raises the kernel read-ahead of the mount above the 128 KiB
// FUSE negotiates, so that a sequential reader keeps MaxWrite-sized
// requests in flight.
func (m *Mounted) setReadAhead(kb int) {
	if m.dev == 0 {
		return
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(m.dev), unix.Minor(m.dev))
	if err := os.WriteFile(p, []byte(fmt.Sprint(kb)), 0); err != nil {
		m.fs.log.Debug("fuse: setting read-ahead failed", "path", p, "err", err)
	}
}

func (m *Mounted) heartbeat(ctx context.Context) {
	every := max(m.fs.opts.OrphanGrace/4, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, m.fs.opts.OpTimeout)
		if err := m.fs.orphans.heartbeat(hctx); err != nil && ctx.Err() == nil {
			m.fs.log.Warn("fuse: orphan directory heartbeat failed", "err", err)
		}
		cancel()
	}
}

// Unmount unmounts the file system at mountpoint, which may belong to a
// crashed process (its FUSE connection gone) or a live one (which then
// ends serving). A busy mount is detached lazily when lazy is set, else
// the error is returned.
func Unmount(mountpoint string, lazy bool) error {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return fmt.Errorf("unmount: %w", err)
	}
	if os.Geteuid() == 0 {
		err := syscall.Unmount(mp, 0)
		if errors.Is(err, syscall.EBUSY) && lazy {
			err = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
		return nil
	}
	args := []string{"-u", mp}
	if lazy {
		args = []string{"-u", "-z", mp}
	}
	out, err := exec.Command("fusermount3", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("unmount %s: fusermount3: %s: %w", mp, out, err)
	}
	return nil
}

func lazyUnmount(mp string) error {
	if os.Geteuid() == 0 {
		return syscall.Unmount(mp, syscall.MNT_DETACH)
	}
	return exec.Command("fusermount3", "-u", "-z", mp).Run()
}

// slogWriter sends go-fuse's log lines (debug output) to a slog.Logger.
type slogWriter struct{ l *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	w.l.Debug(string(p))
	return len(p), nil
}
