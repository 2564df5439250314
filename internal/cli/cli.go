// Package cli implements the sluice command-line tools on top of the client
// library: ls, stat, mkdir, cp, cat, rm, mv, ln and layout. cmd/sluice only
// parses flags and calls these.
//
// In cp, an argument of the form "sluice:/path" names a path in Sluice and
// any other argument a local path; every other command takes Sluice paths.
package cli

import (
	"context"
	"fmt"
	"io"

	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/bench"
	"github.com/sluice-fs/sluice/internal/errs"
)

// Prefix marks a Sluice path in cp.
const Prefix = "sluice:"

// Env holds what every command needs.
type Env struct {
	Client *client.Client
	Stdout io.Writer
	Stderr io.Writer
	// Progress forces a progress bar (default: only on a terminal, for
	// copies of 64 MiB or more).
	Progress *bool
}

// Ls lists paths. A directory lists its entries; long adds mode, links,
// owner, size and time.
func (e *Env) Ls(ctx context.Context, paths []string, long bool) error {
	if len(paths) == 0 {
		paths = []string{"/"}
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 1, ' ', tabwriter.AlignRight)
	defer tw.Flush()
	for i, p := range paths {
		fi, err := e.Client.Stat(ctx, p)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			e.printEntry(tw, fi.Name(), fi, long)
			continue
		}
		if len(paths) > 1 {
			if i > 0 {
				fmt.Fprintln(tw)
			}
			fmt.Fprintf(tw, "%s:\n", p)
		}
		for de, err := range e.Client.ReadDir(ctx, p) {
			if err != nil {
				return err
			}
			if !long {
				fmt.Fprintln(tw, de.Name)
				continue
			}
			cfi, err := e.Client.Lstat(ctx, strings.TrimSuffix(p, "/")+"/"+de.Name)
			if err != nil {
				continue // removed while listing
			}
			e.printEntry(tw, de.Name, cfi, true)
		}
	}
	return nil
}

func (e *Env) printEntry(w io.Writer, name string, fi *client.FileInfo, long bool) {
	if !long {
		fmt.Fprintln(w, name)
		return
	}
	a := fi.Attr()
	fmt.Fprintf(w, "%s\t %d\t %d\t %d\t %d\t %s\t %s\t\n", a.Mode, a.Nlink, a.Uid, a.Gid, a.Size,
		a.Mtime.Format("2006-01-02 15:04"), name)
}

// Stat prints the attributes of each path.
func (e *Env) Stat(ctx context.Context, paths []string) error {
	for _, p := range paths {
		fi, err := e.Client.Lstat(ctx, p)
		if err != nil {
			return err
		}
		a := fi.Attr()
		fmt.Fprintf(e.Stdout, "  File: %s\n  Size: %d\tInode: %d\tLinks: %d\n  Mode: %s (%04o)\tUid: %d\tGid: %d\n",
			p, a.Size, a.Ino, a.Nlink, a.Mode, uint32(a.Mode.Perm()), a.Uid, a.Gid)
		fmt.Fprintf(e.Stdout, "Access: %s\nModify: %s\nChange: %s\n", a.Atime.Format(time.RFC3339Nano),
			a.Mtime.Format(time.RFC3339Nano), a.Ctime.Format(time.RFC3339Nano))
		if a.Mode.IsRegular() || a.Mode.IsDir() {
			fmt.Fprintf(e.Stdout, "Layout: %s\n", formatLayout(a.Layout))
		}
		if a.Mode.IsRegular() && a.Size > 0 {
			stored, err := e.storedBytes(ctx, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.Stdout, "Stored: %d bytes (holes %d)\n", stored, a.Size-stored)
		}
	}
	return nil
}

// storedBytes is how many of the bytes of the file at p its chunks and
// inline bytes hold (client.File.DataBytes).
func (e *Env) storedBytes(ctx context.Context, p string) (int64, error) {
	f, err := e.Client.Open(ctx, p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.DataBytes(ctx)
}

func formatLayout(l client.Layout) string {
	s := fmt.Sprintf("stripe_size=%d stripe_count=%d replicas=%d", l.StripeSize, l.StripeCount, max(l.Replicas, 1))
	if len(l.Chains) > 0 {
		s += fmt.Sprintf(" chains=%v", l.Chains)
	}
	if l.Pool != "" {
		s += " pool=" + l.Pool
	}
	if l.Data != 0 {
		s += fmt.Sprintf(" data=%d", l.Data) // migrated (ADR 0020)
	}
	if len(l.Components) > 0 {
		var parts []string
		var start int64
		for _, c := range l.Components {
			end := "eof"
			if c.End != 0 {
				end = bench.Size(c.End).String()
			}
			count := "all"
			if c.StripeCount > 0 {
				count = fmt.Sprint(c.StripeCount)
			}
			p := fmt.Sprintf("%s-%s %sx%s", bench.Size(start), end, count, bench.Size(c.StripeSize))
			if c.Pool != "" {
				p += " pool=" + c.Pool
			}
			parts = append(parts, p)
			start = c.End
		}
		s += " extents=[" + strings.Join(parts, " | ") + "]"
	}
	return s
}

// ParseExtent parses a progressive layout's component as `sluice layout
// set --extent` takes it: END:COUNT[:SIZE[:POOL]], END a size or "eof"
// (the last), COUNT a number of targets (0: every target of the pool),
// SIZE the stripe size (default 1M), POOL a pool ("": the directory's).
func ParseExtent(s string) (client.LayoutComponent, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 4 {
		return client.LayoutComponent{}, errs.New(errs.Invalid, "extent %q: want END:COUNT[:SIZE[:POOL]]", s)
	}
	var c client.LayoutComponent
	if parts[0] != "eof" {
		end, err := ParseSize(parts[0])
		if err != nil || end <= 0 {
			return c, errs.New(errs.Invalid, "extent %q: end %q is not a size above 0 or eof", s, parts[0])
		}
		c.End = end
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 0 {
		return c, errs.New(errs.Invalid, "extent %q: stripe count %q is not a number of targets (0: all)", s, parts[1])
	}
	c.StripeCount = n
	if len(parts) > 2 && parts[2] != "" {
		if c.StripeSize, err = ParseSize(parts[2]); err != nil {
			return c, errs.New(errs.Invalid, "extent %q: %v", s, err)
		}
	}
	if len(parts) > 3 {
		c.Pool = parts[3]
	}
	return c, nil
}

// Mkdir creates directories (with parents, like mkdir -p).
func (e *Env) Mkdir(ctx context.Context, paths []string, parents bool) error {
	for _, p := range paths {
		var err error
		if parents {
			err = e.Client.MkdirAll(ctx, p, 0o755)
		} else {
			err = e.Client.Mkdir(ctx, p, 0o755)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Cat writes files to stdout.
func (e *Env) Cat(ctx context.Context, paths []string) error {
	for _, p := range paths {
		f, err := e.Client.Open(ctx, p)
		if err != nil {
			return err
		}
		_, err = io.Copy(e.Stdout, io.NewSectionReader(f, 0, 1<<62))
		f.Close()
		if err != nil {
			return fmt.Errorf("cat %s: %w", p, err)
		}
	}
	return nil
}

// Rm removes paths; recursive removes directories and their contents.
func (e *Env) Rm(ctx context.Context, paths []string, recursive bool) error {
	for _, p := range paths {
		if clean(p) == "/" {
			return errs.New(errs.Invalid, "rm: refusing to remove the root")
		}
		var err error
		if recursive {
			if _, err = e.Client.Lstat(ctx, p); err == nil {
				err = e.Client.RemoveAll(ctx, p)
			}
		} else {
			fi, serr := e.Client.Lstat(ctx, p)
			switch {
			case serr != nil:
				err = serr
			case fi.IsDir():
				err = fmt.Errorf("rm %s: %w (use -r)", p, errs.ErrIsDir)
			default:
				err = e.Client.Remove(ctx, p)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Mv renames src to dst; if dst is an existing directory, src moves into it.
func (e *Env) Mv(ctx context.Context, src, dst string) error {
	if fi, err := e.Client.Stat(ctx, dst); err == nil && fi.IsDir() {
		dst = strings.TrimSuffix(dst, "/") + "/" + baseName(src)
	}
	return e.Client.Rename(ctx, src, dst)
}

// Ln makes dst a hard link to src, or a symbolic link with symbolic.
func (e *Env) Ln(ctx context.Context, src, dst string, symbolic bool) error {
	if symbolic {
		return e.Client.Symlink(ctx, src, dst)
	}
	return e.Client.Link(ctx, src, dst)
}

// LayoutGet prints the layout of a file or a directory's default layout.
func (e *Env) LayoutGet(ctx context.Context, p string) error {
	l, err := e.Client.GetLayout(ctx, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "%s: %s\n", p, formatLayout(l))
	return nil
}

// LayoutSet sets the default layout of a directory (or of an empty file).
func (e *Env) LayoutSet(ctx context.Context, p string, l client.Layout) error {
	return e.Client.SetLayout(ctx, p, l)
}

// LayoutSetPool sets the pool of a directory's default layout ("" clears it).
func (e *Env) LayoutSetPool(ctx context.Context, p, pool string) error {
	return e.Client.SetPool(ctx, p, pool)
}

// ParseSize parses sizes like 1048576, 64K, 1M, 1MiB, 4G.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	var v int64
	if _, err := fmt.Sscanf(t, "%d", &v); err != nil || v < 0 || fmt.Sprint(v) != t {
		return 0, errs.New(errs.Invalid, "invalid size %q (use a number with an optional K, M, G or T suffix)", s)
	}
	return v * mult, nil
}

func clean(p string) string {
	p = "/" + strings.Trim(p, "/")
	return p
}

func baseName(p string) string {
	p = strings.TrimRight(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// isLocalDir reports whether a local path is a directory.
func isLocalDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
