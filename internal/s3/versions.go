package s3

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// Object versions (docs/s3.md, "Versioning").
//
// The namespace stays a file view of the latest versions: the file /b/k is
// the current version of key k. Noncurrent versions and delete markers
// live in the bucket's working directory, in a tree that mirrors the keys:
//
//	/b/.sluice-s3/versions/k<c1>/k<c2>/.../k<cn>/v<version>
//
// Each component c of the key becomes the directory "k"+c, and the
// versions of the key are the files "v"+... in its directory, so the
// versions of "a" and the keys below "a/" never share a name whatever the
// keys are. A version file is named after its version ID, which starts
// with the inverted creation time: the names of a key's versions sort
// newest first. The null version (an object written while versioning was
// off or suspended) is named "v" + inverted time + "null".
//
// A version keeps its inode, its data and its metadata xattrs: a write
// over the current object or a delete first links the current file into
// the tree (a second name for the same inode: no data is copied), then
// swaps the new object in with an atomic exchange (or moves the old one
// out of the namespace with a rename), so that readers see the old object
// or the new one. Whatever the exchange displaced and was not linked (a
// concurrent writer's object, through another gateway) is moved into the
// tree by rename. A crash between the link and the exchange leaves the
// current object also listed as a noncurrent version of the same ID, which
// readers skip. Deleting the current version permanently moves the newest
// noncurrent one back into the namespace (a rename) unless it is a delete
// marker.
//
// Versioned writes of one key are serialized within a gateway (keyLocks).

// nullVersion is the version ID of objects written while versioning was
// off or suspended (recorded as "").
const nullVersion = "null"

// versioning is a bucket's versioning state.
type versioning string

const (
	versioningOff       versioning = "" // never enabled
	versioningEnabled   versioning = "Enabled"
	versioningSuspended versioning = "Suspended"
)

var ErrNoSuchVersion = &APIError{Code: "NoSuchVersion", Status: http.StatusNotFound, Message: "The specified version does not exist."}

// versionOrder is the start of version IDs and version file names: the
// inverted time, so that later versions sort first.
func versionOrder(t time.Time) string {
	return fmt.Sprintf("%016x", ^uint64(t.UnixNano()))
}

// newVersionID returns a version ID for an object created at t.
func newVersionID(t time.Time) string { return versionOrder(t) + randomHex(8) }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validVersionID reports whether v could name a version: "null" or one of
// ours (32 lowercase hex digits).
func validVersionID(v string) bool {
	return v == nullVersion || len(v) == 32 && isLowerHex(v)
}

// versionName returns the version ID an object records ("" is null) as
// clients see it.
func versionName(vid string) string {
	if vid == "" {
		return nullVersion
	}
	return vid
}

// versionFileName is the name of the file of version vid (created at
// created, which orders null versions) in its key's directory.
func versionFileName(vid string, created time.Time) string {
	if vid == "" || vid == nullVersion {
		return "v" + versionOrder(created) + nullVersion
	}
	return "v" + vid
}

// parseVersionFileName returns the version ID of a version file name.
func parseVersionFileName(name string) (string, bool) {
	if len(name) < 17 || name[0] != 'v' || !isLowerHex(name[1:17]) {
		return "", false
	}
	switch tail := name[17:]; {
	case tail == nullVersion:
		return nullVersion, true
	case len(tail) == 16 && isLowerHex(tail):
		return name[1:], true
	}
	return "", false
}

func versionsRoot(bucket string) string { return "/" + bucket + "/" + hiddenDir + "/versions" }

// versionDirOf returns the directory of a key's versions, for a key
// objectPath accepted that does not end in '/' (directory objects have no
// versions). A component of 255 bytes has no room for the "k" prefix:
// KeyTooLongError.
func versionDirOf(bucket, key string) (string, error) {
	var b strings.Builder
	b.WriteString(versionsRoot(bucket))
	for c := range strings.SplitSeq(key, "/") {
		if len(c) >= maxNameLen {
			return "", apiErr(ErrKeyTooLong, "In a bucket with versioning, a key's path components are limited to %d bytes (one is %d)", maxNameLen-1, len(c))
		}
		b.WriteString("/k")
		b.WriteString(c)
	}
	return b.String(), nil
}

// The decisions of versioning, from the bucket's state.

// newObjectVersion is the version ID a new object gets ("" is null).
func newObjectVersion(state versioning, now time.Time) string {
	if state == versioningEnabled {
		return newVersionID(now)
	}
	return ""
}

// keepsVersion reports whether an object of version vid ("" null) that a
// write or a delete displaces from the namespace stays as a noncurrent
// version: always while versioning is enabled; while it is suspended only
// if it is not the null version, which the new null version replaces.
func keepsVersion(state versioning, vid string) bool {
	switch state {
	case versioningEnabled:
		return true
	case versioningSuspended:
		return vid != ""
	}
	return false
}

// replacesNull reports whether a write or delete removes the noncurrent
// null version: while versioning is suspended, the new object or delete
// marker is the null version, of which there is one.
func replacesNull(state versioning) bool { return state == versioningSuspended }

// deleteMarkerFor says whether a delete without a version ID leaves a
// delete marker, and with which version ID ("" null).
func deleteMarkerFor(state versioning, now time.Time) (bool, string) {
	switch state {
	case versioningEnabled:
		return true, newVersionID(now)
	case versioningSuspended:
		return true, ""
	}
	return false, ""
}

// promotes reports whether, after a version was deleted permanently, the
// newest noncurrent version becomes the current object again: when the
// namespace holds none and the newest is an object, not a delete marker.
func promotes(curExists bool, head *versionRow) bool {
	return !curExists && head != nil && !head.marker
}

// keyLocks serializes the versioned writes and deletes of a key within a
// gateway (the archive, then the exchange).
type keyLocks struct{ mu [64]sync.Mutex }

func (k *keyLocks) lock(bucket, key string) func() {
	h := fnv.New32a()
	h.Write([]byte(bucket))
	h.Write([]byte{0})
	h.Write([]byte(key))
	m := &k.mu[h.Sum32()%uint32(len(k.mu))]
	m.Lock()
	return m.Unlock
}

// bucketVersioning returns a bucket's versioning state. An unknown value
// counts as enabled: versions are kept rather than lost.
func (g *Gateway) bucketVersioning(ctx context.Context, bucket string) (versioning, error) {
	v, err := g.bucketAttr(ctx, bucket, xattrVersioning)
	if err != nil {
		return versioningOff, err
	}
	switch s := versioning(v); s {
	case versioningOff, versioningEnabled, versioningSuspended:
		return s, nil
	}
	return versioningEnabled, nil
}

// versionFile is one entry of a key's version directory.
type versionFile struct {
	name string
	vid  string
	path string
}

// versionFiles lists the noncurrent versions and delete markers of key,
// newest first.
func (g *Gateway) versionFiles(ctx context.Context, bucket, key string) ([]versionFile, error) {
	if strings.HasSuffix(key, "/") {
		return nil, nil
	}
	dir, err := versionDirOf(bucket, key)
	if err != nil {
		return nil, nil // no version of it can have been kept
	}
	var out []versionFile
	for e, err := range g.c.ReadDir(ctx, dir) {
		if err != nil {
			if c := errs.CodeOf(err); c == errs.NotFound || c == errs.NotDir {
				return nil, nil
			}
			return nil, fsErr(err, ErrInternal, "the versions of key "+key)
		}
		vid, ok := parseVersionFileName(e.Name)
		if !ok || !e.Mode.IsRegular() {
			continue
		}
		out = append(out, versionFile{name: e.Name, vid: vid, path: dir + "/" + e.Name})
	}
	return out, nil
}

// statVersionFile describes a file holding version vid.
func (g *Gateway) statVersionFile(ctx context.Context, p, vid string) (*objInfo, error) {
	fi, err := g.c.Lstat(ctx, p)
	if err != nil {
		return nil, err
	}
	info := &objInfo{path: p, attr: fi.Attr(), meta: &objectMeta{}}
	if raw, err := g.c.GetXattr(ctx, p, xattrMeta); err == nil {
		if m, ok := decodeMeta(raw); ok {
			info.meta = m
		}
	} else if c := errs.CodeOf(err); c != errs.NoData {
		return nil, err
	}
	if info.meta.ETag != "" && info.meta.validFor(info.attr) {
		info.etag = info.meta.ETag
	} else {
		info.etag = syntheticETag(info.attr)
	}
	info.meta.VersionID = strings.TrimPrefix(vid, nullVersion)
	return info, nil
}

// statVersion finds version vid of key: the current object or a
// noncurrent version (maybe a delete marker).
func (g *Gateway) statVersion(ctx context.Context, bucket, key, vid string) (*objInfo, error) {
	if !validVersionID(vid) {
		return nil, apiErr(ErrInvalidArgument, "Invalid version id specified")
	}
	cur, _, err := g.statObjectIn(ctx, bucket, key)
	if err == nil && versionName(cur.meta.VersionID) == vid {
		return cur, nil
	}
	if err != nil && !hasCode(err, ErrNoSuchKey.Code) {
		return nil, err
	}
	files, err := g.versionFiles(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.vid != vid {
			continue
		}
		info, err := g.statVersionFile(ctx, f.path, vid)
		if err != nil {
			if isNotExist(err) {
				break
			}
			return nil, fsErr(err, ErrNoSuchVersion, "version "+vid)
		}
		return info, nil
	}
	return nil, apiErr(ErrNoSuchVersion, "The specified version does not exist.")
}

// hasCode reports whether err is an APIError with this code.
func hasCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

// readTarget returns the object a GET or HEAD (of the object, its ACL,
// tags or attributes) is about: the current one, or the version the
// versionId parameter names. It sets x-amz-version-id and, for delete
// markers, x-amz-delete-marker: 405 MethodNotAllowed for a delete marker
// named by its version, 404 NoSuchKey when the current version is one.
func (g *Gateway) readTarget(rq *request) (*objInfo, error) {
	info, _, err := g.readTargetFile(rq, false)
	return info, err
}

// readTargetFile is readTarget; with open, the current object, if it is a
// file, is also opened for reading (findObject), else the file is nil.
// The caller closes it.
func (g *Gateway) readTargetFile(rq *request, open bool) (*objInfo, *client.File, error) {
	h := rq.w.Header()
	if vids, ok := rq.query["versionId"]; ok {
		info, err := g.statVersion(rq.ctx, rq.bucket, rq.key, vids[0])
		if err != nil {
			return nil, nil, err
		}
		h.Set("X-Amz-Version-Id", vids[0])
		if info.meta.DeleteMarker {
			h.Set("X-Amz-Delete-Marker", "true")
			return nil, nil, apiErr(ErrMethodNotAllowed, "The specified method is not allowed against this resource.")
		}
		return info, nil, nil
	}
	info, f, _, err := g.findObject(rq.ctx, rq.bucket, rq.key, open)
	state := versioningOff
	if err == nil || hasCode(err, ErrNoSuchKey.Code) {
		if state, _ = g.bucketVersioning(rq.ctx, rq.bucket); state == versioningOff {
			return info, f, err
		}
	}
	if err != nil {
		if hasCode(err, ErrNoSuchKey.Code) {
			if files, ferr := g.versionFiles(rq.ctx, rq.bucket, rq.key); ferr == nil && len(files) > 0 {
				if head, herr := g.statVersionFile(rq.ctx, files[0].path, files[0].vid); herr == nil && head.meta.DeleteMarker {
					h.Set("X-Amz-Delete-Marker", "true")
					h.Set("X-Amz-Version-Id", files[0].vid)
				}
			}
		}
		return nil, nil, err
	}
	h.Set("X-Amz-Version-Id", versionName(info.meta.VersionID))
	return info, f, nil
}

// commitObject is commit for object key of bucket: in a bucket with
// versioning the new object gets its version ID, and the object it
// replaces stays as a noncurrent version as the bucket's state says. On
// error the temporary file is removed.
func (g *Gateway) commitObject(ctx context.Context, bucket, key string, st *staged, meta *objectMeta, noReplace bool) (*client.Attr, error) {
	dst, _, err := objectPath(bucket, key)
	if err != nil {
		g.discard(ctx, st)
		return nil, err
	}
	state, err := g.bucketVersioning(ctx, bucket)
	if err != nil {
		g.discard(ctx, st)
		return nil, err
	}
	if state == versioningOff {
		return g.commit(ctx, st, dst, meta, noReplace)
	}
	if _, err := versionDirOf(bucket, key); err != nil {
		g.discard(ctx, st)
		return nil, err
	}
	// The data must be durable before the key's lock is taken: the lock
	// is held by every write of the keys that share it.
	if err := st.durable(); err != nil {
		g.removeQuietly(ctx, st.path)
		return nil, fsErr(err, ErrInternal, "a temporary file")
	}
	defer g.keys.lock(bucket, key)()
	meta.VersionID = newObjectVersion(state, g.now())
	if noReplace {
		// Nothing to displace: the rename fails if an object is there.
		return g.commit(ctx, st, dst, meta, true)
	}
	tmp := st.path
	fail := func(err error) (*client.Attr, error) {
		g.removeQuietly(ctx, tmp)
		return nil, err
	}
	a, err := g.recordMeta(ctx, st, meta)
	if err != nil {
		return fail(err)
	}
	for attempt := 0; ; attempt++ {
		linked, exists, err := g.keepCurrent(ctx, state, bucket, key, dst)
		if err != nil {
			return fail(err)
		}
		if !exists {
			err := g.renameInto(ctx, tmp, dst, true, true)
			if hasCode(err, ErrPreconditionFailed.Code) && attempt < 3 {
				continue // an object appeared meanwhile: keep it too
			}
			if err != nil {
				return fail(err)
			}
			break
		}
		if err := g.c.Exchange(ctx, tmp, dst); err != nil {
			if isNotExist(err) && attempt < 3 {
				continue // deleted meanwhile
			}
			return fail(fsErr(err, ErrInternal, "key "+key))
		}
		// tmp now names the object the exchange displaced.
		g.settleDisplaced(ctx, state, bucket, key, tmp, linked)
		break
	}
	g.temps.done(tmp)
	if replacesNull(state) {
		g.dropNoncurrentNull(ctx, bucket, key)
	}
	return a, nil
}

// keepCurrent links the current object of key (at p) into its versions
// when the bucket's state keeps it, and returns its inode (0 if not
// linked) and whether an object is there. A directory at p is a key
// conflict.
func (g *Gateway) keepCurrent(ctx context.Context, state versioning, bucket, key, p string) (uint64, bool, error) {
	fi, err := g.c.Lstat(ctx, p)
	if err != nil {
		if c := errs.CodeOf(err); c == errs.NotFound || c == errs.NotDir {
			return 0, false, nil
		}
		return 0, false, fsErr(err, ErrInternal, "key "+key)
	}
	if !fi.Mode().IsRegular() {
		return 0, false, apiErr(ErrKeyConflict, "key %s collides with a directory or file of the same name in the file system (see docs/s3.md: a key cannot be both an object and a prefix of other objects)", key)
	}
	vid := g.fileVersion(ctx, p)
	if !keepsVersion(state, vid) {
		return 0, true, nil
	}
	if err := g.linkVersion(ctx, bucket, key, p, vid, fi.ModTime()); err != nil {
		return 0, false, err
	}
	return fi.Attr().Ino, true, nil
}

// fileVersion returns the version ID a file records ("" null).
func (g *Gateway) fileVersion(ctx context.Context, p string) string {
	raw, err := g.c.GetXattr(ctx, p, xattrMeta)
	if err != nil {
		return ""
	}
	m, ok := decodeMeta(raw)
	if !ok {
		return ""
	}
	return m.VersionID
}

// linkVersion gives file p a name in key's versions (a hard link).
func (g *Gateway) linkVersion(ctx context.Context, bucket, key, p, vid string, mtime time.Time) error {
	dir, err := versionDirOf(bucket, key)
	if err != nil {
		return err
	}
	name := dir + "/" + versionFileName(vid, mtime)
	for attempt := 0; ; attempt++ {
		err := g.c.Link(ctx, p, name)
		switch {
		case err == nil, errs.CodeOf(err) == errs.Exists:
			return nil // Exists: kept already (an earlier attempt that crashed)
		case errs.CodeOf(err) == errs.NotFound && attempt == 0:
			if merr := g.c.MkdirAll(ctx, dir, 0o755); merr != nil {
				return fsErr(merr, ErrInternal, "the versions of key "+key)
			}
		default:
			return fsErr(err, ErrInternal, "the versions of key "+key)
		}
	}
}

// moveVersion renames file p into key's versions.
func (g *Gateway) moveVersion(ctx context.Context, bucket, key, p, vid string, mtime time.Time) error {
	dir, err := versionDirOf(bucket, key)
	if err != nil {
		return err
	}
	name := dir + "/" + versionFileName(vid, mtime)
	for attempt := 0; ; attempt++ {
		err := g.c.Rename(ctx, p, name)
		switch {
		case err == nil:
			return nil
		case errs.CodeOf(err) == errs.NotFound && attempt == 0:
			if merr := g.c.MkdirAll(ctx, dir, 0o755); merr != nil {
				return fsErr(merr, ErrInternal, "the versions of key "+key)
			}
		default:
			return fsErr(err, ErrInternal, "the versions of key "+key)
		}
	}
}

// settleDisplaced deals with the object a write or delete moved out of
// the namespace to tmp: it was linked into the versions already (inode
// linked), or is kept now by a rename, or goes.
func (g *Gateway) settleDisplaced(ctx context.Context, state versioning, bucket, key, tmp string, linked uint64) {
	defer g.temps.done(tmp)
	fi, err := g.c.Lstat(ctx, tmp)
	if err != nil {
		g.log.Warn("s3: cannot find the object a write displaced", "path", tmp, "err", err)
		return
	}
	if fi.Attr().Ino != linked && fi.Mode().IsRegular() {
		if vid := g.fileVersion(ctx, tmp); keepsVersion(state, vid) {
			if err := g.moveVersion(ctx, bucket, key, tmp, vid, fi.ModTime()); err != nil {
				g.log.Warn("s3: cannot keep a displaced version", "key", key, "path", tmp, "err", err)
			}
			return
		}
	}
	if err := g.c.Remove(ctx, tmp); err != nil && !isNotExist(err) {
		g.log.Warn("s3: cannot remove a displaced object", "path", tmp, "err", err)
	}
}

// dropNoncurrentNull removes key's noncurrent null version, if any.
func (g *Gateway) dropNoncurrentNull(ctx context.Context, bucket, key string) {
	files, err := g.versionFiles(ctx, bucket, key)
	if err != nil {
		return
	}
	for _, f := range files {
		if f.vid == nullVersion {
			if err := g.c.Remove(ctx, f.path); err != nil && !isNotExist(err) {
				g.log.Warn("s3: cannot remove a replaced null version", "path", f.path, "err", err)
			}
		}
	}
	g.pruneVersionDirs(ctx, bucket, key)
}

// pruneVersionDirs removes key's version directory and its parents while
// they are empty.
func (g *Gateway) pruneVersionDirs(ctx context.Context, bucket, key string) {
	dir, err := versionDirOf(bucket, key)
	if err != nil {
		return
	}
	root := versionsRoot(bucket)
	for strings.HasPrefix(dir, root+"/") {
		if err := g.c.Remove(ctx, dir); err != nil {
			return
		}
		dir = parentDir(dir)
	}
}

// deleteOutcome is what a delete did, for the response headers.
type deleteOutcome struct {
	marker    bool   // a delete marker was made, or deleted
	versionID string // the marker's version, or the version deleted; "" none
}

func (o deleteOutcome) setHeaders(h http.Header) {
	if o.marker {
		h.Set("X-Amz-Delete-Marker", "true")
	}
	if o.versionID != "" {
		h.Set("X-Amz-Version-Id", o.versionID)
	}
}

// deleteObjectKey is DeleteObject without a version ID: in a bucket with
// versioning the current object stays as a noncurrent version (as the
// state says) and a delete marker becomes the current version.
func (g *Gateway) deleteObjectKey(ctx context.Context, bucket, key string, owner string) (deleteOutcome, error) {
	state := versioningOff
	if !strings.HasSuffix(key, "/") { // directory objects have no versions
		var err error
		if state, err = g.bucketVersioning(ctx, bucket); err != nil {
			return deleteOutcome{}, err
		}
	}
	if state == versioningOff {
		return deleteOutcome{}, g.deleteKey(ctx, bucket, key)
	}
	p, _, err := objectPath(bucket, key)
	if err != nil {
		return deleteOutcome{}, err
	}
	if _, err := versionDirOf(bucket, key); err != nil {
		return deleteOutcome{}, err
	}
	defer g.keys.lock(bucket, key)()
	linked, exists, err := g.keepCurrent(ctx, state, bucket, key, p)
	if hasCode(err, ErrKeyConflict.Code) {
		linked, exists, err = 0, false, nil // a directory: no object to keep, as without versioning
	}
	if err != nil {
		return deleteOutcome{}, err
	}
	if exists {
		tmp, err := g.moveOut(ctx, bucket, p)
		if err != nil {
			return deleteOutcome{}, err
		}
		if tmp != "" {
			g.settleDisplaced(ctx, state, bucket, key, tmp, linked)
			g.pruneEmptyDirs(ctx, bucket, parentDir(p))
		}
	} else if err := g.checkBucketIn(ctx, bucket); err != nil {
		return deleteOutcome{}, err
	}
	if replacesNull(state) {
		g.dropNoncurrentNull(ctx, bucket, key)
	}
	marker, vid := deleteMarkerFor(state, g.now())
	if !marker {
		return deleteOutcome{}, nil
	}
	if err := g.makeDeleteMarker(ctx, bucket, key, vid, owner); err != nil {
		return deleteOutcome{}, err
	}
	return deleteOutcome{marker: true, versionID: versionName(vid)}, nil
}

// checkBucketIn returns NoSuchBucket unless the bucket exists.
func (g *Gateway) checkBucketIn(ctx context.Context, bucket string) error {
	fi, err := g.c.Stat(ctx, "/"+bucket)
	if err != nil || !fi.IsDir() {
		return apiErr(ErrNoSuchBucket, "The specified bucket does not exist")
	}
	return nil
}

// moveOut renames the object at p to a new temporary path of the bucket,
// which it returns ("" if p was gone).
func (g *Gateway) moveOut(ctx context.Context, bucket, p string) (string, error) {
	tmp := g.temps.path(bucket)
	for attempt := 0; ; attempt++ {
		err := g.c.Rename(ctx, p, tmp)
		if err == nil {
			return tmp, nil
		}
		if errs.CodeOf(err) != errs.NotFound || attempt > 0 {
			g.temps.done(tmp)
			return "", fsErr(err, ErrInternal, "the object at "+p)
		}
		if _, lerr := g.c.Lstat(ctx, p); lerr != nil {
			g.temps.done(tmp)
			return "", nil // deleted meanwhile
		}
		if err := g.c.MkdirAll(ctx, parentDir(tmp), 0o755); err != nil {
			g.temps.done(tmp)
			return "", fsErr(err, ErrInternal, "the bucket's temporary directory")
		}
	}
}

// makeDeleteMarker records a delete marker of version vid for key: an
// empty file whose metadata says so, renamed into the key's versions.
func (g *Gateway) makeDeleteMarker(ctx context.Context, bucket, key, vid, owner string) error {
	tmp, f, err := g.createTemp(ctx, bucket)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		g.removeQuietly(ctx, tmp)
		return fsErr(err, ErrInternal, "a delete marker")
	}
	a := fi.Attr()
	m := &objectMeta{DeleteMarker: true, VersionID: vid, Owner: owner, Size: a.Size, Mtime: a.Mtime.UnixNano()}
	if err := g.c.SetXattr(ctx, tmp, xattrMeta, m.encode()); err != nil {
		g.removeQuietly(ctx, tmp)
		return fsErr(err, ErrInternal, "a delete marker")
	}
	if err := g.moveVersion(ctx, bucket, key, tmp, vid, a.Mtime); err != nil {
		g.removeQuietly(ctx, tmp)
		return err
	}
	g.temps.done(tmp)
	return nil
}

// deleteVersion deletes version vid of key permanently (DeleteObject with
// a version ID). Deleting the current version makes the newest
// noncurrent one current again, unless it is a delete marker. A version
// that does not exist is no error, as in S3.
func (g *Gateway) deleteVersion(ctx context.Context, bucket, key, vid string) (deleteOutcome, error) {
	if !validVersionID(vid) {
		return deleteOutcome{}, apiErr(ErrInvalidArgument, "Invalid version id specified")
	}
	p, isDir, err := objectPath(bucket, key)
	if err != nil {
		return deleteOutcome{}, err
	}
	if isDir {
		if vid != nullVersion {
			return deleteOutcome{versionID: vid}, nil
		}
		return deleteOutcome{versionID: vid}, g.deleteKey(ctx, bucket, key)
	}
	defer g.keys.lock(bucket, key)()
	out := deleteOutcome{versionID: vid}
	curExists := false
	if fi, err := g.c.Lstat(ctx, p); err == nil && fi.Mode().IsRegular() {
		curExists = true
		if versionName(g.fileVersion(ctx, p)) == vid {
			if err := g.c.Remove(ctx, p); err != nil && !isNotExist(err) {
				return out, fsErr(err, ErrInternal, "key "+key)
			}
			curExists = false
		}
	} else if err != nil && !isNotExist(err) && errs.CodeOf(err) != errs.NotDir {
		return out, fsErr(err, ErrInternal, "key "+key)
	} else if err := g.checkBucketIn(ctx, bucket); err != nil {
		return out, err
	}
	files, err := g.versionFiles(ctx, bucket, key)
	if err != nil {
		return out, err
	}
	var rest []versionFile
	for _, f := range files {
		if f.vid != vid {
			rest = append(rest, f)
			continue
		}
		if info, err := g.statVersionFile(ctx, f.path, f.vid); err == nil && info.meta.DeleteMarker {
			out.marker = true
		}
		if err := g.c.Remove(ctx, f.path); err != nil && !isNotExist(err) {
			return out, fsErr(err, ErrInternal, "version "+vid+" of key "+key)
		}
	}
	var head *versionRow
	if len(rest) > 0 {
		if info, err := g.statVersionFile(ctx, rest[0].path, rest[0].vid); err == nil {
			head = &versionRow{vid: rest[0].vid, marker: info.meta.DeleteMarker}
		}
	}
	if promotes(curExists, head) {
		if err := g.renameInto(ctx, rest[0].path, p, true, true); err != nil && !hasCode(err, ErrPreconditionFailed.Code) {
			g.log.Warn("s3: cannot make the newest version current", "key", key, "version", rest[0].vid, "err", err)
		}
	} else if !curExists {
		g.pruneEmptyDirs(ctx, bucket, parentDir(p))
	}
	g.pruneVersionDirs(ctx, bucket, key)
	return out, nil
}

// deleteAny is DeleteObject with or without a version ID.
func (g *Gateway) deleteAny(ctx context.Context, bucket, key, vid string, hasVID bool, owner string) (deleteOutcome, error) {
	if hasVID {
		return g.deleteVersion(ctx, bucket, key, vid)
	}
	return g.deleteObjectKey(ctx, bucket, key, owner)
}

// getBucketVersioning is GetBucketVersioning: no Status if versioning
// was never enabled.
func (g *Gateway) getBucketVersioning(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	state, err := g.bucketVersioning(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	return writeXML(rq, versioningResult{Xmlns: s3Namespace, Status: string(state)})
}

// putBucketVersioning is PutBucketVersioning: Enabled or Suspended. MFA
// delete is not supported.
func (g *Gateway) putBucketVersioning(rq *request) error {
	body, err := g.readDocument(rq, true)
	if err != nil {
		return err
	}
	var doc versioningConfiguration
	if _, err := decodeXML(body, &doc, false); err != nil {
		return err
	}
	state := versioning(strings.TrimSpace(doc.Status))
	if state != versioningEnabled && state != versioningSuspended {
		return apiErr(ErrMalformedXML, "The versioning Status must be Enabled or Suspended, not %q", doc.Status)
	}
	if m := strings.TrimSpace(doc.MfaDelete); m != "" && m != "Disabled" {
		return apiErr(ErrNotImplemented, "MFA delete is not supported by Sluice")
	}
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	if err := g.setBucketAttr(rq.ctx, rq.bucket, xattrVersioning, []byte(state)); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// hasVersions reports whether a bucket keeps any noncurrent version or
// delete marker.
func (g *Gateway) hasVersions(ctx context.Context, bucket string) (bool, error) {
	for _, err := range g.c.ReadDir(ctx, versionsRoot(bucket)) {
		if err != nil {
			if c := errs.CodeOf(err); c == errs.NotFound || c == errs.NotDir {
				return false, nil
			}
			return false, err
		}
		return true, nil
	}
	return false, nil
}
