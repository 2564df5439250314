package fusefs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// orphanRootName is the hidden directory in the root that holds one
// directory per live mount, named <host>-<pid>-<random>, with a link
// named <ino> to each file that was unlinked while the mount had it open.
const orphanRootName = ".sluice-orphans"

// orphans is a mount's orphan directory.
type orphans struct {
	c     *client.Client
	log   *slog.Logger
	root  uint64 // inode of /.sluice-orphans
	dir   uint64 // inode of this mount's directory in it
	name  string // its name
	host  string
	grace time.Duration
}

var rootOwner = client.Owner{Uid: 0, Gid: 0}

// setupOrphans creates this mount's orphan directory and frees the orphans
// of mounts that are gone.
func setupOrphans(ctx context.Context, c *client.Client, grace time.Duration, log *slog.Logger) (*orphans, error) {
	root, err := c.MkdirIno(ctx, c.RootIno(), orphanRootName, 0o700, rootOwner)
	if errs.CodeOf(err) == errs.Exists {
		root, err = c.LookupIno(ctx, c.RootIno(), orphanRootName)
	}
	if err != nil {
		return nil, fmt.Errorf("fusefs: orphan directory: %w", err)
	}
	host, _ := os.Hostname()
	host = strings.ReplaceAll(host, "/", "_")
	var rnd [4]byte
	rand.Read(rnd[:])
	o := &orphans{c: c, log: log, root: root.Ino, host: host, grace: grace,
		name: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(rnd[:]))}
	d, err := c.MkdirIno(ctx, o.root, o.name, 0o700, rootOwner)
	if err != nil {
		return nil, fmt.Errorf("fusefs: orphan directory: %w", err)
	}
	o.dir = d.Ino
	if err := o.collect(ctx); err != nil {
		log.Warn("fuse: freeing the orphans of dead mounts failed", "err", err)
	}
	return o, nil
}

func (o *orphans) pin(ctx context.Context, ino uint64) error {
	_, err := o.c.LinkIno(ctx, ino, o.dir, strconv.FormatUint(ino, 10))
	if errs.CodeOf(err) == errs.Exists {
		return nil
	}
	return err
}

func (o *orphans) unpin(ctx context.Context, ino uint64) error {
	err := o.c.UnlinkIno(ctx, o.dir, strconv.FormatUint(ino, 10))
	if errs.CodeOf(err) == errs.NotFound {
		return nil
	}
	return err
}

// heartbeat tells other mounts that this one is alive.
func (o *orphans) heartbeat(ctx context.Context) error {
	_, err := o.c.SetAttrIno(ctx, o.dir, client.AttrChange{Valid: client.AttrMtimeNow})
	return err
}

// collect frees the orphan directories of mounts that are gone: on this
// host, those whose process is dead; elsewhere, those whose heartbeat is
// older than the grace period.
func (o *orphans) collect(ctx context.Context) error {
	var errList []error
	cursor := ""
	for {
		page, err := o.c.ReadDirPage(ctx, o.root, cursor, dirPageSize, true)
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			if e.Ino == o.dir || e.Attr == nil || !e.Attr.IsDir() || !o.dead(e.Name, e.Attr) {
				continue
			}
			o.log.Info("fuse: freeing the unlinked files of a dead mount", "mount", e.Name)
			if err := o.removeDir(ctx, e.Name, e.Ino); err != nil {
				errList = append(errList, err)
			}
		}
		if page.EOF || len(page.Entries) == 0 {
			return errors.Join(errList...)
		}
		cursor = page.Cursor
	}
}

// dead reports whether the mount that owns orphan directory name is gone.
func (o *orphans) dead(name string, a *client.InodeAttr) bool {
	if time.Since(time.Unix(0, a.Mtime)) > o.grace {
		return true
	}
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return false
	}
	j := strings.LastIndexByte(name[:i], '-')
	if j < 0 || name[:j] != o.host {
		return false
	}
	pid, err := strconv.Atoi(name[j+1 : i])
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// removeDir unlinks every entry of orphan directory name and removes it.
func (o *orphans) removeDir(ctx context.Context, name string, ino uint64) error {
	for {
		page, err := o.c.ReadDirPage(ctx, ino, "", dirPageSize, false)
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			if err := o.c.UnlinkIno(ctx, ino, e.Name); err != nil && errs.CodeOf(err) != errs.NotFound {
				return err
			}
		}
		if page.EOF || len(page.Entries) == 0 {
			break
		}
	}
	err := o.c.RmdirIno(ctx, o.root, name)
	if errs.CodeOf(err) == errs.NotFound {
		return nil
	}
	return err
}

// close frees what is left in this mount's orphan directory and removes it.
func (o *orphans) close(ctx context.Context) error {
	return o.removeDir(ctx, o.name, o.dir)
}
