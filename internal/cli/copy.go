package cli

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// copyBufSize is the size of the buffer bytes move through in cp.
const copyBufSize = 4 << 20

// progressMin is the total size from which cp shows a progress bar.
const progressMin = 64 << 20

// tree is one side of a copy: the local file system or Sluice.
type tree interface {
	lstat(ctx context.Context, p string) (fs.FileInfo, error)
	stat(ctx context.Context, p string) (fs.FileInfo, error)
	list(ctx context.Context, p string) ([]string, error)
	open(ctx context.Context, p string) (io.ReadCloser, error)
	create(ctx context.Context, p string, perm fs.FileMode) (io.WriteCloser, error)
	mkdir(ctx context.Context, p string, perm fs.FileMode) error
	readlink(ctx context.Context, p string) (string, error)
	symlink(ctx context.Context, target, p string) error
	join(dir, name string) string
}

type localTree struct{}

func (localTree) lstat(_ context.Context, p string) (fs.FileInfo, error) { return os.Lstat(p) }
func (localTree) stat(_ context.Context, p string) (fs.FileInfo, error)  { return os.Stat(p) }
func (localTree) list(_ context.Context, p string) ([]string, error) {
	ents, err := os.ReadDir(p)
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, err
}
func (localTree) open(_ context.Context, p string) (io.ReadCloser, error) { return os.Open(p) }
func (localTree) create(_ context.Context, p string, perm fs.FileMode) (io.WriteCloser, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return nil, err
	}
	return syncCloser{f}, nil
}
func (localTree) mkdir(_ context.Context, p string, perm fs.FileMode) error {
	err := os.Mkdir(p, perm)
	if os.IsExist(err) && isLocalDir(p) {
		return nil
	}
	return err
}
func (localTree) readlink(_ context.Context, p string) (string, error) { return os.Readlink(p) }
func (localTree) symlink(_ context.Context, t, p string) error         { return os.Symlink(t, p) }
func (localTree) join(dir, name string) string                         { return filepath.Join(dir, name) }

// syncCloser makes Close of a local copy durable, like Close of a Sluice file.
type syncCloser struct{ f *os.File }

func (s syncCloser) Write(p []byte) (int, error) { return s.f.Write(p) }
func (s syncCloser) Close() error {
	if err := s.f.Sync(); err != nil {
		s.f.Close()
		return err
	}
	return s.f.Close()
}

type sluiceTree struct{ c *client.Client }

func (t sluiceTree) lstat(ctx context.Context, p string) (fs.FileInfo, error) {
	return t.c.Lstat(ctx, p)
}
func (t sluiceTree) stat(ctx context.Context, p string) (fs.FileInfo, error) { return t.c.Stat(ctx, p) }
func (t sluiceTree) list(ctx context.Context, p string) ([]string, error) {
	var names []string
	for e, err := range t.c.ReadDir(ctx, p) {
		if err != nil {
			return nil, err
		}
		names = append(names, e.Name)
	}
	return names, nil
}
func (t sluiceTree) open(ctx context.Context, p string) (io.ReadCloser, error) {
	return t.c.Open(ctx, p)
}
func (t sluiceTree) create(ctx context.Context, p string, perm fs.FileMode) (io.WriteCloser, error) {
	return t.c.OpenFile(ctx, p, client.O_WRONLY|client.O_CREATE|client.O_TRUNC, perm)
}
func (t sluiceTree) mkdir(ctx context.Context, p string, perm fs.FileMode) error {
	err := t.c.Mkdir(ctx, p, perm)
	if errs.CodeOf(err) == errs.Exists {
		if fi, serr := t.c.Stat(ctx, p); serr == nil && fi.IsDir() {
			return nil
		}
	}
	return err
}
func (t sluiceTree) readlink(ctx context.Context, p string) (string, error) {
	return t.c.Readlink(ctx, p)
}
func (t sluiceTree) symlink(ctx context.Context, target, p string) error {
	return t.c.Symlink(ctx, target, p)
}
func (sluiceTree) join(dir, name string) string { return path.Join(dir, name) }

func (e *Env) side(arg string) (tree, string) {
	if p, ok := strings.CutPrefix(arg, Prefix); ok {
		if p == "" {
			p = "/"
		}
		return sluiceTree{e.Client}, p
	}
	return localTree{}, arg
}

// Copy copies sources to dst like cp(1): with several sources, or when dst
// is an existing directory, each source lands inside dst. Directories need
// recursive. Symbolic links are copied as links, file modes are kept.
func (e *Env) Copy(ctx context.Context, srcs []string, dst string, recursive bool) error {
	if len(srcs) == 0 {
		return errs.New(errs.Invalid, "cp: no source given")
	}
	dt, dp := e.side(dst)
	dstIsDir := false
	if fi, err := dt.stat(ctx, dp); err == nil && fi.IsDir() {
		dstIsDir = true
	}
	if len(srcs) > 1 && !dstIsDir {
		return fmt.Errorf("cp: target %s is not a directory", dst)
	}
	type job struct {
		st     tree
		sp, dp string
	}
	var jobs []job
	var total int64
	for _, src := range srcs {
		st, sp := e.side(src)
		fi, err := st.lstat(ctx, sp)
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		if fi.IsDir() && !recursive {
			return fmt.Errorf("cp: %s is a directory (use -r)", src)
		}
		target := dp
		if dstIsDir {
			target = dt.join(dp, baseName(sp))
		}
		n, err := sizeOf(ctx, st, sp, fi)
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		total += n
		jobs = append(jobs, job{st, sp, target})
	}
	c := &copier{env: e, buf: make([]byte, copyBufSize)}
	show := total >= progressMin
	if e.Progress != nil {
		show = *e.Progress
	} else if f, ok := e.Stderr.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		show = false
	}
	if show {
		c.bar = progressbar.DefaultBytes(total, "copying")
		defer c.bar.Finish()
	}
	for _, j := range jobs {
		if err := c.copy(ctx, j.st, j.sp, dt, j.dp); err != nil {
			return fmt.Errorf("cp: %w", err)
		}
	}
	return nil
}

func sizeOf(ctx context.Context, t tree, p string, fi fs.FileInfo) (int64, error) {
	if !fi.IsDir() {
		if fi.Mode().IsRegular() {
			return fi.Size(), nil
		}
		return 0, nil
	}
	names, err := t.list(ctx, p)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, n := range names {
		cp := t.join(p, n)
		cfi, err := t.lstat(ctx, cp)
		if err != nil {
			return 0, err
		}
		s, err := sizeOf(ctx, t, cp, cfi)
		if err != nil {
			return 0, err
		}
		total += s
	}
	return total, nil
}

type copier struct {
	env *Env
	buf []byte
	bar *progressbar.ProgressBar
}

func (c *copier) copy(ctx context.Context, st tree, sp string, dt tree, dp string) error {
	fi, err := st.lstat(ctx, sp)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		if err := dt.mkdir(ctx, dp, fi.Mode().Perm()|0o700); err != nil {
			return err
		}
		names, err := st.list(ctx, sp)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := c.copy(ctx, st, st.join(sp, n), dt, dt.join(dp, n)); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := st.readlink(ctx, sp)
		if err != nil {
			return err
		}
		return dt.symlink(ctx, target, dp)
	case fi.Mode().IsRegular():
		return c.copyFile(ctx, st, sp, dt, dp, fi.Mode().Perm())
	default:
		fmt.Fprintf(c.env.Stderr, "cp: skipping %s: not a regular file, directory or symlink\n", sp)
		return nil
	}
}

func (c *copier) copyFile(ctx context.Context, st tree, sp string, dt tree, dp string, perm fs.FileMode) error {
	in, err := st.open(ctx, sp)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dt.create(ctx, dp, perm)
	if err != nil {
		return err
	}
	var w io.Writer = out
	if c.bar != nil {
		w = io.MultiWriter(out, c.bar)
	}
	if _, err := io.CopyBuffer(onlyWriter{w}, onlyReader{in}, c.buf); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", sp, dp, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy %s to %s: %w", sp, dp, err)
	}
	return nil
}

// onlyReader and onlyWriter hide ReaderFrom/WriterTo so that CopyBuffer
// uses our large buffer.
type onlyReader struct{ io.Reader }
type onlyWriter struct{ io.Writer }
