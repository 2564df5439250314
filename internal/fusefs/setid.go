package fusefs

import (
	"context"
	"syscall"

	"github.com/sluice-fs/sluice/client"
)

// The mount clears set-user-ID and set-group-ID bits itself
// (FUSE_HANDLE_KILLPRIV_V2). Without it the kernel does, but to learn
// whether a file has a security.capability attribute to drop it asks
// GETXATTR before every write(2): a round trip per write, as many as the
// writes themselves. With it the kernel marks the mount SB_NOSEC, asks
// once per inode, and sends instead:
//
//   - a write by a process without CAP_FSETID with WRITE_KILL_SUIDGID;
//   - a truncate by such a process, and any chown of a non-directory,
//     with FATTR_KILL_SUIDGID;
//   - an O_TRUNC open by such a process with OPEN_KILL_SUIDGID (also on
//     a create, which is ignored: a new file keeps the bits it was
//     created with, as on a local file system, where O_TRUNC does not
//     truncate a file that open created).
//
// Each then clears the set-user-ID bit, and the set-group-ID bit of a
// group-executable file (without group execute it marks mandatory
// locking and stays), as Linux does for local files. File capabilities
// need no clearing: the mount never reports a security.* attribute
// (MountOptions.IgnoreSecurityLabels), so none is ever in effect.
//
// The flag comes with every write of an unprivileged process, so a write
// checks the mode this mount last saw (openFile.mode, refreshed by every
// attribute reply for the file) and asks the metadata service only when
// that shows a bit to clear. Another client's chmod is seen as late as
// the kernel's own cached mode would be without this capability.

// setIDKill returns the set-ID bits of mode that a write, truncate or
// chown clears.
func setIDKill(mode uint32) uint32 {
	kill := mode & syscall.S_ISUID
	if mode&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP {
		kill |= syscall.S_ISGID
	}
	return kill
}

// killSetID clears the set-ID bits of a that setIDKill names and updates
// a. It reports whether it changed the mode.
func (fs *fileSystem) killSetID(ctx context.Context, a *client.InodeAttr) (bool, error) {
	kill := setIDKill(a.Mode)
	if kill == 0 {
		return false, nil
	}
	na, err := fs.c.SetAttrIno(ctx, a.Ino, client.AttrChange{Valid: client.AttrMode, Mode: a.Mode &^ kill & 0o7777})
	if err != nil {
		return false, err
	}
	*a = na
	return true, nil
}

// killSetIDOpen clears the set-ID bits of an open file for a request that
// carries no attributes back (write, open): it fetches the attributes
// when the mode last seen has bits to clear, and makes the kernel drop
// its cached mode after a change.
func (fs *fileSystem) killSetIDOpen(ctx context.Context, of *openFile) error {
	if setIDKill(of.mode.Load()) == 0 {
		return nil
	}
	a, err := fs.c.GetAttrIno(ctx, of.ino)
	if err != nil {
		return err
	}
	changed, err := fs.killSetID(ctx, &a)
	if err != nil {
		return err
	}
	of.mode.Store(a.Mode)
	if changed {
		fs.notifyAttr(of.ino)
	}
	return nil
}
