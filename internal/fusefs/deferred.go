package fusefs

import (
	"context"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-fs/sluice/client"
)

// Deferred attributes. Unpacking a file (tar, cp -p) ends with three
// system calls on the open descriptor that only restore what the archive
// says: futimens (the modification time), fchown (the same owner, for
// root) and fchmod (wider permission bits than the create's). Each was a
// SETATTR answered by a metadata transaction: half of the time of `tar -x`
// through the mount. For a file this mount created and holds open for
// writing, such changes are answered from what the mount knows and sent
// to the metadata service as one change when the file is closed (FLUSH),
// synced (FSYNC), written or changed otherwise again, or released. Other
// clients see them at the close, as they see the file's data
// (close-to-open); this mount sees them at once.
//
// Only changes that hide nothing from anybody until then are deferred:
//   - of a file this mount created, while the create's descriptor (open
//     for writing) is open (the kernel names no handle for fchmod, fchown
//     or futimens: they are changes of the inode);
//   - an explicit modification time starts the deferral (no "now": its
//     time would be the close's); once one is deferred, an explicit
//     access time, an owner or group equal to the file's (a chown that
//     changes nothing but the change time) and a mode that only adds
//     permission bits (no set-ID or sticky bit, before or after) are
//     deferred too;
//   - no size change, and no set-ID bit to clear.
//
// A change that takes rights away (a narrower mode, another owner) is
// never deferred: until the close other clients would keep them. What
// the close sends cannot fail for want of permission: the kernel checked
// it (default_permissions) before asking.

// pendingAttrs is an open file's deferred attribute changes. Guarded by mu.
type pendingAttrs struct {
	mu sync.Mutex
	// base: the file's attributes as this mount last got them from a
	// create or a setattr reply; valid only while haveBase.
	base     client.InodeAttr
	haveBase bool
	on       bool              // changes are pending
	ch       client.AttrChange // what to send (mtime, atime, mode, uid, gid)
	caller   client.Owner      // who made them
	gen      uint64            // counts the changes merged into ch
	// sent: the changes sent last, and when their reply came
	// (client.Mark): a reply to a request begun before then may predate
	// them, and they go on it too (overlayPending).
	sent   client.AttrChange
	sentAt client.PendingToken
}

// remember records a as the file's latest attributes from the metadata
// service (a create's or a setattr's reply). What was sent before no
// longer goes on replies: this change is newer.
func (p *pendingAttrs) remember(a client.InodeAttr) {
	p.mu.Lock()
	p.base, p.haveBase = a, true
	p.sentAt = 0
	p.mu.Unlock()
}

// wasSent reports whether changes were sent (sentAt).
func (p *pendingAttrs) wasSent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sentAt != 0
}

// forget drops the remembered attributes (another client changed them).
func (p *pendingAttrs) forget() {
	p.mu.Lock()
	p.haveBase = false
	p.sentAt = 0 // another client's change is newer than what was sent
	p.mu.Unlock()
}

// deferrable is the pure decision: may change ch, asked with size change
// sized and FATTR flags valid, be held while base (with the changes
// already pending, if on) is what the file looks like?
func deferrable(base client.InodeAttr, on bool, ch client.AttrChange, sized bool, valid uint32) bool {
	if sized || ch.Valid == 0 || valid&(fuse.FATTR_ATIME_NOW|fuse.FATTR_MTIME_NOW) != 0 {
		return false
	}
	if valid&fuse.FATTR_KILL_SUIDGID != 0 && setIDKill(base.Mode) != 0 {
		return false
	}
	if !on && ch.Valid&client.AttrMtime == 0 {
		return false // only an explicit modification time starts it
	}
	if ch.Valid&client.AttrUid != 0 && ch.Uid != base.Uid || ch.Valid&client.AttrGid != 0 && ch.Gid != base.Gid {
		return false
	}
	if ch.Valid&client.AttrMode != 0 {
		old, nw := base.Mode&0o7777, ch.Mode&0o7777
		if old&0o7000 != 0 || nw&0o7000 != 0 || nw&old != old {
			return false
		}
	}
	return true
}

// applyChange returns base with ch applied and change time now.
func applyChange(ch client.AttrChange, base client.InodeAttr, now int64) client.InodeAttr {
	a := base
	if ch.Valid&client.AttrMode != 0 {
		a.Mode = a.Mode&^0o7777 | ch.Mode&0o7777
	}
	if ch.Valid&client.AttrUid != 0 {
		a.Uid = ch.Uid
	}
	if ch.Valid&client.AttrGid != 0 {
		a.Gid = ch.Gid
	}
	if ch.Valid&client.AttrAtime != 0 {
		a.Atime = ch.Atime
	}
	if ch.Valid&client.AttrMtime != 0 {
		a.Mtime = ch.Mtime
	}
	a.Ctime = now
	return a
}

// merge adds ch's fields to p's pending change.
func (p *pendingAttrs) merge(ch client.AttrChange) {
	p.ch.Valid |= ch.Valid
	if ch.Valid&client.AttrMode != 0 {
		p.ch.Mode = ch.Mode
	}
	if ch.Valid&client.AttrUid != 0 {
		p.ch.Uid = ch.Uid
	}
	if ch.Valid&client.AttrGid != 0 {
		p.ch.Gid = ch.Gid
	}
	if ch.Valid&client.AttrAtime != 0 {
		p.ch.Atime = ch.Atime
	}
	if ch.Valid&client.AttrMtime != 0 {
		p.ch.Mtime = ch.Mtime
	}
}

// deferSetAttr holds change ch of a SETATTR if it may be (see above) and
// fills the reply; it reports whether it did.
func (fs *fileSystem) deferSetAttr(in *fuse.SetAttrIn, of *openFile, ch client.AttrChange, out *fuse.AttrOut, g uint64) bool {
	if of.creators.Load() == 0 {
		return false
	}
	_, sized := in.GetSize()
	p := &of.pend
	p.mu.Lock()
	if !p.haveBase || !deferrable(p.base, p.on, ch, sized, in.Valid) {
		p.mu.Unlock()
		return false
	}
	p.merge(ch)
	p.on = true
	p.gen++
	p.caller = owner(&in.InHeader)
	a := applyChange(ch, p.base, time.Now().UnixNano())
	p.base = a
	p.mu.Unlock()
	a.Size = max(a.Size, uint64(of.f.KnownSize()))
	of.mode.Store(a.Mode)
	fs.tellKernel(&a, true)
	fillAttr(&a, &out.Attr)
	out.SetTimeout(fs.ttl(g).attr)
	return true
}

// applyPending sends of's deferred attribute changes, after its buffered
// data (whose commit would otherwise overwrite the modification time):
// for a small file, both in one request (client.File.FlushAttr).
func (fs *fileSystem) applyPending(ctx context.Context, of *openFile) error {
	p := &of.pend
	p.mu.Lock()
	if !p.on {
		p.mu.Unlock()
		return nil
	}
	// The changes stay pending while they are sent: a reply to the
	// kernel meanwhile still shows them (overlayPending).
	ch, caller, gen := p.ch, p.caller, p.gen
	p.mu.Unlock()
	a, err := of.f.FlushAttr(client.WithCaller(ctx, caller), ch)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen == gen {
		// Nothing deferred since: done (also when the send failed; the
		// error goes to the caller, and the changes are not sent again).
		p.on, p.ch = false, client.AttrChange{}
	}
	if err != nil {
		return err
	}
	p.base, p.haveBase = a, true
	p.sent, p.sentAt = ch, fs.c.Mark()
	return nil
}

// overlayPending puts of's deferred changes on attributes a from the
// metadata service, for a reply to the kernel: those still held, and
// those sent since tok was taken, before the request that returned a
// began (a may predate their commit).
func (of *openFile) overlayPending(a *client.InodeAttr, tok client.PendingToken) {
	p := &of.pend
	p.mu.Lock()
	defer p.mu.Unlock()
	var ch client.AttrChange
	switch {
	case p.on:
		ch = p.ch
	case p.sentAt > tok:
		ch = p.sent
	default:
		return
	}
	*a = applyChange(ch, *a, max(a.Ctime, p.base.Ctime))
}
