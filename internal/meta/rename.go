package meta

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/internal/audit"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// maxDepth bounds the walk up the parent chain; a longer chain means the
// parent pointers form a cycle.
const maxDepth = 1 << 16

// Rename moves OldParent/OldName to NewParent/NewName in one transaction,
// with the rules of Linux renameat2:
//
//   - an existing target is replaced atomically (a file over a directory is
//     errs.IsDir, a directory over a file errs.NotDir, a directory over a
//     non-empty directory errs.NotEmpty); a replaced inode whose last link
//     goes is freed;
//   - wire.RenameNoReplace fails with errs.Exists if the target exists;
//   - wire.RenameExchange swaps two existing entries of any types;
//   - moving a directory into its own subtree is errs.Invalid;
//   - renaming an entry onto itself or onto another link of the same inode
//     does nothing.
//
// Directory parent pointers and the parents' link counts follow the moves.
// The subtree check reads every inode on the path from the new parent to
// the root, so two renames that could together make a cycle conflict and
// are serialized by the engine.
func (s *Service) Rename(ctx context.Context, req *wire.RenameReq) error {
	if err := s.rename(ctx, req); err != nil {
		return entryErr("rename", req.OldParent, req.OldName,
			fmt.Errorf("to %d/%q: %w", req.NewParent, req.NewName, err))
	}
	return nil
}

func (s *Service) rename(ctx context.Context, req *wire.RenameReq) error {
	flags := req.Flags
	switch {
	case flags&^(wire.RenameNoReplace|wire.RenameExchange) != 0:
		return errs.New(errs.Invalid, "unknown rename flags %#x", flags)
	case flags == wire.RenameNoReplace|wire.RenameExchange:
		return errs.New(errs.Invalid, "rename flags NOREPLACE and EXCHANGE together")
	}
	if err := validName(req.OldName); err != nil {
		return err
	}
	if err := validName(req.NewName); err != nil {
		return err
	}
	exchange := flags&wire.RenameExchange != 0
	now := s.nowNs()
	var fr freeResult
	err := s.update(ctx, func(tx kv.Txn) error {
		fr = freeResult{}
		opIno, npIno := req.OldParent, req.NewParent
		op, err := getDir(tx, opIno)
		if err != nil {
			return err
		}
		np := op
		if npIno != opIno {
			if np, err = getDir(tx, npIno); err != nil {
				return err
			}
		}
		src, ok, err := lookup(tx, opIno, req.OldName)
		if err != nil {
			return err
		}
		if !ok {
			return errs.New(errs.NotFound, "no entry %q in directory %d", req.OldName, opIno)
		}
		dst, dstOK, err := lookup(tx, npIno, req.NewName)
		if err != nil {
			return err
		}
		switch {
		case flags&wire.RenameNoReplace != 0 && dstOK:
			return errs.ErrExists
		case exchange && !dstOK:
			return errs.New(errs.NotFound, "no entry %q in directory %d to exchange with", req.NewName, npIno)
		case dstOK && dst.ino == src.ino:
			return nil // the same entry, or two links to one inode
		}
		srcDir, dstDir := src.mode == modeDir, dstOK && dst.mode == modeDir
		if srcDir && npIno != opIno {
			if err := checkNotAncestor(tx, src.ino, npIno); err != nil {
				return err
			}
		}
		if exchange && dstDir && npIno != opIno {
			if err := checkNotAncestor(tx, dst.ino, opIno); err != nil {
				return err
			}
		}
		if !exchange && dstOK {
			switch {
			case srcDir && !dstDir:
				return errs.New(errs.NotDir, "cannot replace non-directory %q with a directory", req.NewName)
			case !srcDir && dstDir:
				return errs.New(errs.IsDir, "cannot replace directory %q with a non-directory", req.NewName)
			case dstDir:
				empty, err := isEmptyDir(tx, dst.ino)
				if err != nil {
					return err
				}
				if !empty {
					return errs.New(errs.NotEmpty, "target directory %q is not empty", req.NewName)
				}
			}
		}
		// Only a rename that would succeed is refused for staged files
		// (so a client that queues it, ADR 0013, queues a valid one).
		if err := checkStaged(tx, opIno, npIno, src); err != nil {
			return err // ADR 0013: a checkpoint's commit waits for its shards to drain
		}
		srcNode, err := getInode(tx, src.ino)
		if err != nil {
			return err
		}
		var dstNode *inode
		if dstOK {
			if dstNode, err = getInode(tx, dst.ino); err != nil {
				return err
			}
		}

		nlinkOp, nlinkNp := op.Nlink, np.Nlink
		if exchange {
			tx.Set(direntKey(opIno, req.OldName), dst.encode())
			tx.Set(direntKey(npIno, req.NewName), src.encode())
			if npIno != opIno {
				if srcDir {
					srcNode.Parent = npIno
					op.Nlink--
					np.Nlink++
				}
				if dstDir {
					dstNode.Parent = opIno
					np.Nlink--
					op.Nlink++
				}
			}
			if err := setCtime(tx, dst.ino, dstNode, now); err != nil {
				return err
			}
			if !dstDir || npIno != opIno {
				tx.Set(inodeKey(dst.ino), dstNode.encode())
			}
		} else {
			if dstOK {
				switch {
				case dstDir: // checked above: an empty directory, replaced by one
					np.Nlink--
					if err := removeDir(tx, dst.ino, &fr); err != nil {
						return err
					}
				default:
					if err := dropLink(tx, dst.ino, dstNode, now, &fr); err != nil {
						return err
					}
				}
			}
			tx.Delete(direntKey(opIno, req.OldName))
			tx.Set(direntKey(npIno, req.NewName), src.encode())
			if srcDir && npIno != opIno {
				srcNode.Parent = npIno
				op.Nlink--
				np.Nlink++
			}
		}
		// The moved inodes' ctimes change, files and directories alike (as
		// on Linux and POSIX-2008). A directory's ctime lives in its "t"
		// key, so its record is written only when its parent changes: a
		// rename of a directory within one parent then does not conflict
		// with creates in that directory (which read its record), only
		// with entry changes there (which write the "t" key setCtime reads).
		ae := audit.Entry{Time: now, Op: audit.OpRename, Ino: src.ino, Parent: opIno, Name: req.OldName,
			NewParent: npIno, NewName: req.NewName, Who: whoOf(ctx, req.Cred)}
		if exchange {
			ae.Op = audit.OpExchange
		}
		if dstOK {
			ae.Replaced = dst.ino
		}
		if err := s.appendAudit(tx, &ae); err != nil {
			return err
		}
		if err := setCtime(tx, src.ino, srcNode, now); err != nil {
			return err
		}
		if !srcDir || npIno != opIno {
			tx.Set(inodeKey(src.ino), srcNode.encode())
		}
		if op.Nlink != nlinkOp {
			tx.Set(inodeKey(opIno), op.encode())
		}
		touchDir(tx, opIno, now)
		if npIno != opIno {
			if np.Nlink != nlinkNp {
				tx.Set(inodeKey(npIno), np.encode())
			}
			touchDir(tx, npIno, now)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.audited()
	s.account(fr)
	return nil
}

// checkNotAncestor fails with errs.Invalid if dir is start or one of its
// ancestors, that is if moving dir into start would make a cycle.
func checkNotAncestor(tx kv.Txn, dir, start uint64) error {
	x := start
	for range maxDepth {
		if x == dir {
			return errs.New(errs.Invalid, "cannot move directory %d into its own subtree", dir)
		}
		if x == RootIno {
			return nil
		}
		n, err := getInode(tx, x)
		if err != nil {
			return err
		}
		x = n.Parent
	}
	return errs.New(errs.Corruption, "meta: parent chain from inode %d is longer than %d (cycle?)", start, maxDepth)
}
