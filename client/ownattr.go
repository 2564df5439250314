package client

import (
	"sync"

	"github.com/sluice-fs/sluice/internal/wire"
)

// ownChain follows the file's state through a File's own changes, the way
// NFS's weak cache consistency does: each change of the file's mtime or
// size (a size commit, an inline write, a truncate) names the state the
// File last knew (its If fields), and the metadata service says whether
// the file was still in it (wire.AttrUnchanged). While every answer says
// so, nobody else changed the file since the File was opened, and
// (mtime, size) is the file's state after the File's latest change. One
// answer that does not say so, or a change whose answer was lost (it may
// have been applied), breaks the chain for good.
type ownChain struct {
	mu     sync.Mutex
	mtime  int64
	size   uint64
	known  bool // the chain was started (OpenInode)
	broken bool
}

// start begins the chain at the state the File was opened in.
func (o *ownChain) start(mtime int64, size uint64) {
	o.mu.Lock()
	o.mtime, o.size, o.known = mtime, size, true
	o.mu.Unlock()
}

// ifState returns the If fields for the File's next change: zero (no
// check) once the chain is broken or if it never started.
func (o *ownChain) ifState() (mtime int64, size uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.known || o.broken || o.mtime == 0 {
		return 0, 0
	}
	return o.mtime, o.size
}

// answer takes the answer to a change sent with ifMtime (0: unchecked).
func (o *ownChain) answer(ifMtime int64, a *wire.Attr) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ifMtime == 0 || a.Flags&wire.AttrUnchanged == 0 {
		o.broken = true
		return
	}
	o.mtime, o.size = a.Mtime, a.Size
}

// brk breaks the chain (a change whose answer was lost).
func (o *ownChain) brk() {
	o.mu.Lock()
	o.broken = true
	o.mu.Unlock()
}

// OwnAttr returns the mtime and size the file had right after the latest
// change this File made to it, if nobody else changed the file since the
// File was opened (as far as the metadata service's answers to the File's
// changes tell: ownChain), every write through the File reached the
// servers (no flush failed) and the File is not staged (checkpoint.md).
// Called after a successful FlushContext, it lets a cache of the file's
// pages filled by this File's reads and writes be kept for as long as the
// file still has this mtime and size (the mount keeps its kernel page
// cache across opens on it; internal/fusefs). Only Files of OpenInode
// follow the chain.
func (f *File) OwnAttr() (mtime int64, size uint64, ok bool) {
	if f.writeErr() != nil {
		return 0, 0, false
	}
	f.mu.Lock()
	staged := f.stg != nil
	f.mu.Unlock()
	o := &f.own
	o.mu.Lock()
	defer o.mu.Unlock()
	if staged || !o.known || o.broken {
		return 0, 0, false
	}
	return o.mtime, o.size, true
}
