package client

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/pause"
	"github.com/sluice-fs/sluice/internal/wire"
)

// AbsorbMode is a directory's checkpoint absorb policy (ADR 0013).
type AbsorbMode uint8

const (
	// AbsorbInherit: the directory has no policy of its own; its nearest
	// ancestor's applies (none: off).
	AbsorbInherit AbsorbMode = AbsorbMode(wire.AbsorbInherit)
	// AbsorbOn: files created below are acknowledged from the writing
	// client's staging area and drained to the targets in the background;
	// renames below wait for the drain of what they commit.
	AbsorbOn AbsorbMode = AbsorbMode(wire.AbsorbOn)
	// AbsorbOff: files below are written straight to the targets.
	AbsorbOff AbsorbMode = AbsorbMode(wire.AbsorbOff)
)

func (m AbsorbMode) String() string {
	switch m {
	case AbsorbInherit:
		return "inherit"
	case AbsorbOn:
		return "on"
	case AbsorbOff:
		return "off"
	}
	return fmt.Sprintf("AbsorbMode(%d)", uint8(m))
}

// ParseAbsorbMode parses "on", "off" or "inherit".
func ParseAbsorbMode(s string) (AbsorbMode, error) {
	for _, m := range []AbsorbMode{AbsorbOn, AbsorbOff, AbsorbInherit} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, errs.New(errs.Invalid, "client: absorb mode %q is not on, off or inherit", s)
}

// AbsorbPolicy is the policy in force for a directory and where it comes
// from.
type AbsorbPolicy struct {
	Mode AbsorbMode // AbsorbOn or AbsorbOff
	From uint64     // the directory that sets it (0: none does)
}

// SetAbsorb sets directory p's own absorb policy (AbsorbInherit removes
// it). It applies to files created below p from then on, on each client
// within a second.
func (c *Client) SetAbsorb(ctx context.Context, p string, m AbsorbMode) error {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return opErr("setabsorb", p, err)
	}
	if err := c.metaCall(ctx, wire.OpAbsorbSet, &wire.AbsorbSetReq{Ino: a.Ino, Mode: uint8(m)}, nil); err != nil {
		return opErr("setabsorb", p, err)
	}
	return nil
}

// GetAbsorb returns the absorb policy in force for directory p.
func (c *Client) GetAbsorb(ctx context.Context, p string) (AbsorbPolicy, error) {
	a, err := c.resolve(ctx, p, true)
	if err != nil {
		return AbsorbPolicy{}, opErr("getabsorb", p, err)
	}
	var r wire.AbsorbPolicy
	if err := c.metaCall(ctx, wire.OpAbsorbGet, &wire.InoReq{Ino: a.Ino}, &r); err != nil {
		return AbsorbPolicy{}, opErr("getabsorb", p, err)
	}
	return AbsorbPolicy{Mode: AbsorbMode(r.Mode), From: r.From}, nil
}

// StagedFile is a file with data staged on a client and not yet drained.
type StagedFile struct {
	Ino   uint64
	Owner string // the client's staging area, host-random
}

// StagedFiles lists the files whose staged data is not yet on the targets,
// on every client.
func (c *Client) StagedFiles(ctx context.Context) ([]StagedFile, error) {
	var r wire.StagedListResp
	if err := c.metaCall(ctx, wire.OpStagedList, nil, &r); err != nil {
		return nil, fmt.Errorf("list staged files: %w", err)
	}
	out := make([]StagedFile, len(r.Files))
	for i, f := range r.Files {
		out[i] = StagedFile{Ino: f.Ino, Owner: f.Owner}
	}
	return out, nil
}

// WaitStaged returns once everything this client staged is durable on the
// targets and every rename it queued is carried out (at once without a
// staging area).
func (c *Client) WaitStaged(ctx context.Context) error {
	if c.stg == nil {
		return nil
	}
	return c.stg.wait(ctx)
}

// WaitStagingReserve returns once the staging reserve
// (Options.StagingReserve) is allocated, or its allocation stopped (a
// full file system: StagingStats says how far it got). At once without
// one.
func (c *Client) WaitStagingReserve(ctx context.Context) error {
	if c.stg == nil {
		return nil
	}
	select {
	case <-c.stg.reserved:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StagingStats returns the counters of this client's staging area (zero
// without one).
func (c *Client) StagingStats() StagingStats {
	st, _ := c.Staging()
	return st
}

// HoldDrain defers the drain of this client's staging area until release
// is called (each segment yields drainMaxDefer, 10 s, in all at most;
// readers of staged files and writers waiting for room under the staging
// limit still let it run): a checkpoint writer holds it while it
// serializes and writes its shards, so that the drain does not take the
// CPUs from the save, and it runs at full speed once released. Holds
// nest; release is idempotent. Without a staging area it does nothing.
func (c *Client) HoldDrain() (release func()) {
	if c.stg == nil {
		return func() {}
	}
	s := c.stg
	s.holds.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() { s.holds.Add(-1) })
	}
}

// Staging returns the staging area's counts (as StagingStats), and whether
// the client has a staging area (Options.StagingDir).
func (c *Client) Staging() (StagingStats, bool) {
	if c.stg == nil {
		return StagingStats{}, false
	}
	c.stg.mu.Lock()
	defer c.stg.mu.Unlock()
	st := c.stg.stats
	st.Limit, st.Held = c.stg.limit, c.stg.held
	return st, true
}

// absorbIn reports whether files created in directory dir are absorbed,
// trusting an answer for policyTTL.
func (s *stager) absorbIn(ctx context.Context, dir uint64) (bool, error) {
	s.mu.Lock()
	e, ok := s.policy[dir]
	s.mu.Unlock()
	if ok && time.Since(e.at) < policyTTL {
		return e.on, nil
	}
	var r wire.AbsorbPolicy
	if err := s.c.metaCall(ctx, wire.OpAbsorbGet, &wire.InoReq{Ino: dir}, &r); err != nil {
		if errs.CodeOf(err) == errs.NotSupported {
			return false, nil // an older service: no policies
		}
		return false, err
	}
	on := r.Mode == wire.AbsorbOn
	s.mu.Lock()
	if len(s.policy) > 4096 {
		clear(s.policy)
	}
	s.policy[dir] = policyEntry{on: on, at: time.Now()}
	s.mu.Unlock()
	return on, nil
}

// stageCreated remembers the directory of a file created through the
// inode API, for the OpenInode that follows (the mount's create).
func (c *Client) stageCreated(ino, dir uint64) {
	if c.stg == nil {
		return
	}
	c.stg.mu.Lock()
	if len(c.stg.created) > 4096 {
		clear(c.stg.created)
	}
	c.stg.created[ino] = dir
	c.stg.mu.Unlock()
}

// stageOpen puts a writable File under the absorb policy when its
// directory has it: dir is its directory, or 0 to find it from the path
// the File was opened with (byPath) or from a create through this client.
func (c *Client) stageOpen(ctx context.Context, f *File, dir uint64, byPath bool) error {
	s := c.stg
	if s == nil || !f.writable() {
		return nil
	}
	if size, ok := s.stagedSize(f.ino); ok {
		// The file has staged data still draining: later writes must
		// land after it, so they are staged too, whatever the policy;
		// and its size is the staged one (the service's lags).
		f.stg = &stagedFile{s: s, f: f}
		f.size = max(f.size, size)
		return nil
	}
	if dir == 0 && !byPath {
		s.mu.Lock()
		dir = s.created[f.ino]
		delete(s.created, f.ino)
		s.mu.Unlock()
	}
	if dir == 0 && byPath {
		d, _, err := c.parent(ctx, f.name)
		if err != nil {
			return opErr("open", f.name, err)
		}
		dir = d
	}
	if dir == 0 {
		return nil
	}
	on, err := s.absorbIn(ctx, dir)
	if err != nil {
		return opErr("open", f.name, err)
	}
	if on {
		f.stg = &stagedFile{s: s, f: f}
	}
	return nil
}

// awaitStagedLocked makes reads of a file with staged data see it: the
// File's own open segment is sealed and the file's drain awaited, then
// the size is learnt again. f.mu is held.
func (f *File) awaitStagedLocked(ctx context.Context) error {
	s := f.c.stg
	if s == nil {
		return nil
	}
	if f.stg != nil && f.stg.seg != nil {
		if err := f.stg.seal(ctx, f.size); err != nil {
			return err
		}
	}
	if _, ok := s.stagedSize(f.ino); !ok {
		return nil
	}
	if err := s.waitIno(ctx, f.ino); err != nil {
		return err
	}
	var a wire.Attr
	if err := f.c.metaCall(ctx, wire.OpGetAttr, &wire.InoReq{Ino: f.ino}, &a); err != nil {
		return err
	}
	f.learn(&a)
	f.size = max(f.size, int64(a.Size))
	f.icache = nil
	return nil
}

// overlayStaged shows this client's staged data in attributes it got
// from the metadata service: a file's size counts its staged writes.
func (c *Client) overlayStaged(a *wire.Attr) {
	if c.stg == nil || a == nil {
		return
	}
	if size, ok := c.stg.stagedSize(a.Ino); ok && int64(a.Size) < size {
		a.Size = uint64(size)
	}
}

// stagedToken returns the count of files whose staged data drained so
// far, for overlayStagedSince: taken before the request for attributes.
func (c *Client) stagedToken() uint64 {
	if c.stg == nil {
		return 0
	}
	c.stg.mu.Lock()
	defer c.stg.mu.Unlock()
	return c.stg.nDrained
}

// overlayStagedSince is overlayStaged for attributes asked for when the
// token was tok: a drain that ended since may have committed its size
// after the service answered, so the size it gave the file counts too.
func (c *Client) overlayStagedSince(a *wire.Attr, tok uint64) {
	c.overlayStaged(a)
	if c.stg == nil || a == nil {
		return
	}
	if size, ok := c.stg.drainedSince(a.Ino, tok); ok && int64(a.Size) < size {
		a.Size = uint64(size)
	}
}

// renameCall sends a rename (of oldPath to newPath when the caller named
// paths, else ""). Under the absorb policy the metadata service
// refuses one (errs.Busy) while files it commits are staged: a client
// with a staging area then queues it durably and returns, one without
// waits and retries. Renames of a client with queued renames queue behind
// them, so they keep their order.
func (c *Client) renameCall(ctx context.Context, req *wire.RenameReq, oldPath, newPath string) error {
	if s := c.stg; s != nil && s.queuedRenames() > 0 {
		moved, err := c.checkRenameView(ctx, req, oldPath, newPath)
		if err != nil {
			return err
		}
		if moved.src != 0 && moved.src == moved.dst {
			return nil // two links of one file: nothing happens (POSIX; the service's rename too)
		}
		return s.deferRename(req, oldPath, newPath, moved)
	}
	backoff := 5 * time.Millisecond
	for {
		err := c.metaCall(ctx, wire.OpRename, req, nil)
		if errs.CodeOf(err) != errs.Busy {
			return err
		}
		if s := c.stg; s != nil {
			// Nothing queued before it: the service's names are this
			// client's. The inodes it moves or replaces, for lookups
			// through symbolic links (lookupPath).
			var moved movedInodes
			if a, err := c.LookupInoNow(ctx, req.OldParent, req.OldName); err == nil {
				moved.src, moved.dir = a.Ino, a.IsDir()
			}
			if a, err := c.LookupInoNow(ctx, req.NewParent, req.NewName); err == nil {
				moved.dst = a.Ino
			}
			return s.deferRename(req, oldPath, newPath, moved)
		}
		if pause.For(ctx, backoff) != nil {
			return err
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// checkRenameView checks a rename that is to queue behind this client's
// queued renames, so is not sent yet, against the namespace as this
// client sees it (the service's with those renames done): it fails as
// the service would once they are carried out, for a missing source, an
// existing target of RenameNoReplace, a missing one of RenameExchange, a
// directory over a non-directory or the reverse, a directory over one
// that is not empty, and (when the caller named paths) a directory into
// itself. The first attempt of a rename is checked by the service, which
// refuses a valid rename only for staged files. A queued rename can still
// fail when carried out if another client changed the names meanwhile
// (StagingStats.LastErrors says so). It returns the inodes the rename
// moves and replaces (0: none).
func (c *Client) checkRenameView(ctx context.Context, req *wire.RenameReq, oldPath, newPath string) (moved movedInodes, err error) {
	src, err := c.LookupIno(ctx, req.OldParent, req.OldName)
	if err != nil {
		return moved, err
	}
	moved.src, moved.dir = src.Ino, src.IsDir()
	dst, err := c.LookupIno(ctx, req.NewParent, req.NewName)
	dstOK := err == nil
	if err != nil && errs.CodeOf(err) != errs.NotFound {
		return moved, err
	}
	if dstOK {
		moved.dst = dst.Ino
	}
	exchange := req.Flags&wire.RenameExchange != 0
	switch {
	case req.Flags&wire.RenameNoReplace != 0 && dstOK:
		return moved, errs.New(errs.Exists, "client: rename: %q exists", req.NewName)
	case exchange && !dstOK:
		return moved, errs.New(errs.NotFound, "client: rename: no entry %q to exchange with", req.NewName)
	case dstOK && dst.Ino == src.Ino:
		return moved, nil
	}
	srcDir, dstDir := moved.dir, dstOK && dst.IsDir()
	if srcDir && oldPath != "" && newPath != "" && under(newPath, oldPath) {
		return moved, errs.New(errs.Invalid, "client: rename: cannot move %s into itself", oldPath)
	}
	if exchange || !dstOK {
		return moved, nil
	}
	switch {
	case srcDir && !dstDir:
		return moved, errs.New(errs.NotDir, "client: rename: cannot replace non-directory %q with a directory", req.NewName)
	case !srcDir && dstDir:
		return moved, errs.New(errs.IsDir, "client: rename: cannot replace directory %q with a non-directory", req.NewName)
	case dstDir:
		page, err := c.readDirPage(ctx, &wire.ReadDirReq{Ino: dst.Ino, Limit: 1})
		if err != nil {
			return moved, err
		}
		if len(page.Entries) > 0 {
			return moved, errs.New(errs.NotEmpty, "client: rename: target directory %q is not empty", req.NewName)
		}
	}
	return moved, nil
}

// Read-your-renames. A rename this client queued behind staged files
// (renameCall) has returned but not happened yet: in the metadata service
// the name it creates does not resolve, and the one it removes still does
// (with the file it replaced, possibly an older checkpoint). This
// client's lookups see its renames done at once: a name is mapped
// through the queued renames, newest first, to the name it has in the
// service now (renamedPath, renamedName), or found removed by one of
// them; a lookup that then misses because a rename completed meanwhile is
// mapped again. Operations that make or remove such a name (create,
// mkdir, remove, link, symlink, put) wait until the rename is carried
// out instead, as a read of a staged file waits for its drain (the drains
// stop yielding to writers meanwhile): they must apply after it. Other
// names are not held up.

// renamedAway is the error of a lookup of name, which a queued rename of
// this client removed.
func renamedAway(name string) error {
	return errs.New(errs.NotFound, "client: %s: renamed away by a rename of this client (queued until the files it commits drain)", name)
}

// under reports whether path p is x or lies below it.
func under(p, x string) bool { return p == x || strings.HasPrefix(p, x+"/") }

// renamedPath maps path p, as this client sees it after its queued
// renames rs (oldest first), to the path it has in the metadata service
// now; gone says a queued rename removed it. Renames without paths (by
// inode, or adopted from a dead client's area) are not known to path
// lookups (see waitRenamesPath for their mutations).
func renamedPath(p string, rs []*renameRec) (q string, gone bool) {
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		switch {
		case r.oldPath == "":
		case under(p, r.newPath):
			p = r.oldPath + p[len(r.newPath):]
		case under(p, r.oldPath):
			if r.req.Flags&wire.RenameExchange == 0 {
				return "", true
			}
			p = r.newPath + p[len(r.oldPath):]
		}
	}
	return p, false
}

// renamedName is renamedPath for entry name of directory parent.
func renamedName(parent uint64, name string, rs []*renameRec) (uint64, string, bool) {
	for i := len(rs) - 1; i >= 0; i-- {
		r := &rs[i].req
		switch {
		case parent == r.NewParent && name == r.NewName:
			parent, name = r.OldParent, r.OldName
		case parent == r.OldParent && name == r.OldName:
			if r.Flags&wire.RenameExchange == 0 {
				return 0, "", true
			}
			parent, name = r.NewParent, r.NewName
		}
	}
	return parent, name, false
}

// dirMove is where the entry that a listed directory shows under a name
// is in the metadata service now, after this client's queued renames
// (renamedName); gone: one of them removed it.
type dirMove struct {
	parent uint64
	name   string
	gone   bool
}

// renamedDir returns the names of directory dir whose entries this
// client's queued renames rs (oldest first) change, each mapped to where
// the entry it shows is in the metadata service now: a listing of dir
// hides the service's entries of these names and shows the mapped ones
// under them instead. A name they leave with its own entry (renamed away
// and back) is not in it.
func renamedDir(dir uint64, rs []*renameRec) map[string]dirMove {
	var m map[string]dirMove
	add := func(parent uint64, name string) {
		if parent != dir {
			return
		}
		if _, ok := m[name]; ok {
			return
		}
		p, n, gone := renamedName(dir, name, rs)
		if !gone && p == dir && n == name {
			return
		}
		if m == nil {
			m = make(map[string]dirMove)
		}
		m[name] = dirMove{parent: p, name: n, gone: gone}
	}
	for _, r := range rs {
		add(r.req.OldParent, r.req.OldName)
		add(r.req.NewParent, r.req.NewName)
	}
	return m
}

// renamesNow returns this client's queued renames (oldest first) and the
// count of those done, for renamesMoved.
func (s *stager) renamesNow() ([]*renameRec, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.renames), s.renameDone
}

// throughRenames runs lookup with this client's queued renames (oldest
// first), for it to map a name through them (read-your-renames), and runs
// it again while it misses because a rename left the queue meanwhile: a
// rename leaves the queue as the service answers it, and a miss waits for
// the attempts in flight to answer first (one may have happened before
// the lookup that then missed).
func (s *stager) throughRenames(lookup func(rs []*renameRec) error) error {
	for {
		rs, done := s.renamesNow()
		err := lookup(rs)
		if errs.CodeOf(err) != errs.NotFound || len(rs) == 0 || !s.renamesMoved(done) {
			return err
		}
	}
}

// renamesMoved reports whether a queued rename left the queue since its
// count was done, once every attempt sent so far has answered.
func (s *stager) renamesMoved(done int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sent := s.renameSent; s.renameAnswered < sent; {
		s.cond.Wait()
	}
	return s.renameDone != done
}

// lookupPath runs call with path p as this client's queued renames map it
// (throughRenames); call returns the inode it found. A path a queued
// rename removed is not found. renamedPath maps the names of p, not
// those of the symbolic links along it, which the metadata service
// follows in its own namespace: when the answer may depend on a queued
// rename (nothing found, an inode a queued rename moves or replaces, or
// any answer while a queued rename moves a directory), the links along p
// are expanded here, each name resolved as this client sees it, and the
// path without links is mapped and resolved instead (one resolve per
// name of p more).
// follow: whether a link at the end of p is followed.
func (c *Client) lookupPath(ctx context.Context, p string, follow bool, call func(q string) (uint64, error)) error {
	if c.stg == nil {
		_, err := call(p)
		return err
	}
	cp := clean(p)
	return c.stg.throughRenames(func(rs []*renameRec) error {
		q, gone := renamedPath(cp, rs)
		if gone {
			return renamedAway(p)
		}
		ino, err := call(q)
		if len(rs) == 0 || (err == nil && !renamesMove(rs, ino)) || (err != nil && errs.CodeOf(err) != errs.NotFound) {
			return err
		}
		x, expanded, xerr := c.expandLinks(ctx, cp, follow, rs)
		switch {
		case xerr != nil:
			return xerr
		case !expanded:
			return err
		}
		if q, gone = renamedPath(x, rs); gone {
			return renamedAway(p)
		}
		_, err = call(q)
		return err
	})
}

// movedInodes are the inodes a queued rename moves (src; dir: a
// directory) and replaces (dst), 0 where none or unknown (a rename
// adopted from a dead client's area).
type movedInodes struct {
	src, dst uint64
	dir      bool
}

// renamesMove reports whether the answer ino of a lookup by path may
// depend on the queued renames rs beyond their names: one of them moves
// a directory (a path may reach it, or what was below it, through a
// symbolic link), or moves or replaces ino itself.
func renamesMove(rs []*renameRec, ino uint64) bool {
	for _, r := range rs {
		if r.moved.dir || (ino != 0 && (r.moved.src == ino || r.moved.dst == ino)) {
			return true
		}
	}
	return false
}

// maxLinks is how many symbolic links expandLinks follows in one path (as
// Linux's 40).
const maxLinks = 40

// expandLinks returns path p (clean, absolute) with the symbolic links
// along it replaced by their targets, each name resolved as this client
// sees the namespace (mapped through its queued renames rs), so that a
// link to a name a queued rename makes, or replaces, leads where this
// client sees it; the last name's link only if follow. expanded is false
// when p holds no link.
func (c *Client) expandLinks(ctx context.Context, p string, follow bool, rs []*renameRec) (string, bool, error) {
	done, rest := "/", strings.Split(strings.TrimPrefix(p, "/"), "/")
	expanded, links := false, 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done) // done holds no link: as the kernel does
			continue
		}
		next := path.Join(done, name)
		if len(rest) == 0 && !follow {
			done = next
			break
		}
		q, gone := renamedPath(next, rs)
		if gone {
			return "", expanded, renamedAway(next)
		}
		var a wire.Attr
		if err := c.metaCall(ctx, wire.OpResolve, &wire.ResolveReq{Path: q}, &a); err != nil {
			return "", expanded, err
		}
		if a.Mode&syscall.S_IFMT != syscall.S_IFLNK {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", expanded, errs.ErrLoop
		}
		var t wire.StringResp
		if err := c.metaCall(ctx, wire.OpReadlink, &wire.InoReq{Ino: a.Ino}, &t); err != nil {
			return "", expanded, err
		}
		target := t.S
		if !strings.HasPrefix(target, "/") {
			target = path.Join(done, target)
		}
		rest = append(strings.Split(strings.TrimPrefix(target, "/"), "/"), rest...)
		done, expanded = "/", true
	}
	return done, expanded, nil
}

// renameAffects reports whether making or removing path p depends on a
// rename of oldPath to newPath (clean absolute paths; "" unknown): p is
// one of them, lies below one, or holds one (a directory that a queued
// rename moves an entry into or out of is not empty, or empty, in the
// service as this client sees it).
func renameAffects(p, oldPath, newPath string) bool {
	related := func(x string) bool { return x != "" && (under(p, x) || under(x, p)) }
	return related(oldPath) || related(newPath)
}

// waitRenamesPath waits for this client's queued renames that an
// operation making or removing path p depends on.
func (c *Client) waitRenamesPath(ctx context.Context, p string) error {
	if c.stg == nil {
		return nil
	}
	p = clean(p)
	return c.stg.waitRenames(ctx, func(r *renameRec) bool { return renameAffects(p, r.oldPath, r.newPath) })
}

// waitRenamesAt waits for this client's queued renames from or to name in
// directory parent (before an operation that makes or removes it).
func (c *Client) waitRenamesAt(ctx context.Context, parent uint64, name string) error {
	if c.stg == nil {
		return nil
	}
	return c.stg.waitRenames(ctx, func(r *renameRec) bool { return r.at(parent, name) })
}

// at reports whether r renames name in directory parent, from or to it.
func (r *renameRec) at(parent uint64, name string) bool {
	return (r.req.NewParent == parent && r.req.NewName == name) || (r.req.OldParent == parent && r.req.OldName == name)
}

// waitRenamesDir is waitRenamesAt before the removal of directory name
// in parent: it also waits for this client's queued renames into or out
// of that directory, which this client sees done (so the directory
// empty, or not) and the service does not yet.
func (c *Client) waitRenamesDir(ctx context.Context, parent uint64, name string) error {
	if c.stg == nil || c.stg.queuedRenames() == 0 {
		return nil
	}
	var dir uint64
	if a, err := c.LookupIno(ctx, parent, name); err == nil {
		dir = a.Ino
	} // else the rmdir says why
	return c.stg.waitRenames(ctx, func(r *renameRec) bool {
		return r.at(parent, name) || (dir != 0 && (r.req.OldParent == dir || r.req.NewParent == dir))
	})
}

// waitRenames waits until the last queued rename that match selects is
// carried out (they run in order, so every one before it is too).
func (s *stager) waitRenames(ctx context.Context, match func(*renameRec) bool) error {
	s.mu.Lock()
	var last *renameRec
	for _, r := range s.renames {
		if match(r) {
			last = r
		}
	}
	s.mu.Unlock()
	if last == nil {
		return nil
	}
	s.waiting.Add(1) // the drains stop yielding to writers
	defer s.waiting.Add(-1)
	select {
	case <-last.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
