package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// copyBufSize is the buffer of one object stream: large enough that the
// client library sends full stripes.
const copyBufSize = 1 << 20

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyStream copies src to dst through a pooled buffer.
func copyStream(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(dst, src, *bp)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := io.ReadFull(randReader, b); err != nil {
		panic("s3: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// objInfo is what statObject learns about an object.
type objInfo struct {
	path string
	dir  bool // a "dir/" object: a directory
	attr *client.Attr
	meta *objectMeta // never nil
	etag string      // hex, unquoted
}

// statObject finds the object behind key: a regular file, or for a key
// ending in '/' a directory that is empty or was created as an object.
// Symlinks and other file types are not objects.
func (g *Gateway) statObject(rq *request, key string) (*objInfo, bool, error) {
	return g.statObjectIn(rq.ctx, rq.bucket, key)
}

func (g *Gateway) statObjectIn(ctx context.Context, bucket, key string) (*objInfo, bool, error) {
	info, _, ok, err := g.findObject(ctx, bucket, key, false)
	return info, ok, err
}

// findObject is statObjectIn; with open, an object that is a file is also
// opened for reading, and its metadata comes with the open (one request,
// which for a small file brings its bytes too). The caller closes the
// file. errReplaced says that the key named another file by the time it
// was opened.
func (g *Gateway) findObject(ctx context.Context, bucket, key string, open bool) (*objInfo, *client.File, bool, error) {
	p, isDir, err := objectPath(bucket, key)
	if err != nil {
		return nil, nil, false, err
	}
	noKey := func(cause error) error {
		if fi, err := g.c.Stat(ctx, "/"+bucket); err != nil || !fi.IsDir() {
			return apiErr(ErrNoSuchBucket, "The specified bucket does not exist")
		}
		return wrapErr(ErrNoSuchKey, cause, "The specified key does not exist.")
	}
	var f *client.File
	var raw []byte
	var xerr error
	var info *objInfo
	var fi *client.FileInfo
	if open && !isDir {
		// One request: the file's attributes, its metadata xattr and a
		// small file's bytes. Not following a symlink: symlinks and the
		// like are not objects.
		var a client.InodeAttr
		var err error
		f, a, raw, err = g.c.OpenReadNoFollow(ctx, p, xattrMeta)
		if err != nil {
			switch errs.CodeOf(err) {
			case errs.NotFound, errs.NotDir:
				return nil, nil, false, noKey(err)
			case errs.IsDir, errs.Invalid:
				return nil, nil, false, noKey(nil)
			}
			return nil, nil, false, fsErr(err, ErrNoSuchKey, "key "+key)
		}
		info = &objInfo{path: p, attr: attrOfInode(a)}
		if raw == nil {
			xerr = errs.ErrNoData
		}
	} else {
		var err error
		fi, err = g.c.Lstat(ctx, p)
		if err != nil {
			if c := errs.CodeOf(err); c == errs.NotFound || c == errs.NotDir {
				return nil, nil, false, noKey(err)
			}
			return nil, nil, false, fsErr(err, ErrNoSuchKey, "key "+key)
		}
		if !isDir && !fi.Mode().IsRegular() {
			return nil, nil, false, noKey(nil) // symlinks and the like are not objects
		}
		info = &objInfo{path: p, dir: isDir, attr: fi.Attr()}
		// By inode: no second path walk, and the metadata is that of
		// the file just found even if the key is replaced meanwhile.
		raw, xerr = g.c.GetXattrIno(ctx, info.attr.Ino, xattrMeta)
	}
	var stored *objectMeta
	if xerr == nil {
		stored, _ = decodeMeta(raw)
	} else if c := errs.CodeOf(xerr); c != errs.NoData && c != errs.NotFound {
		return nil, nil, false, fsErr(xerr, ErrNoSuchKey, "key "+key)
	}
	if isDir {
		if !fi.IsDir() {
			return nil, nil, false, noKey(nil)
		}
		if stored == nil {
			empty, err := g.emptyDir(ctx, p)
			if err != nil {
				return nil, nil, false, fsErr(err, ErrNoSuchKey, "key "+key)
			}
			if !empty {
				return nil, nil, false, noKey(nil)
			}
			stored = &objectMeta{}
		}
		info.meta, info.etag = stored, emptyETag
		info.attr.Size = 0
		return info, nil, true, nil
	}
	info.setFileMeta(stored)
	return info, f, true, nil
}

// setFileMeta sets the metadata and ETag of info, a regular file's object,
// from the metadata the gateway stored with it (nil: none).
func (info *objInfo) setFileMeta(stored *objectMeta) {
	switch {
	case stored != nil && stored.ETag != "" && stored.validFor(info.attr):
		info.meta, info.etag = stored, stored.ETag
	case stored != nil:
		// Changed through POSIX since the gateway wrote it: the headers
		// still apply, the ETag and checksums do not.
		info.meta = &objectMeta{ContentType: stored.ContentType, Headers: stored.Headers, User: stored.User, ACL: stored.ACL, Owner: stored.Owner, VersionID: stored.VersionID, Tags: stored.Tags,
			Size: stored.Size, Mtime: stored.Mtime, StorageClass: stored.StorageClass} // the class counts while they match (storageClass)
		info.etag = syntheticETag(info.attr)
	default:
		info.meta, info.etag = &objectMeta{}, syntheticETag(info.attr)
	}
}

// attrOfInode converts the attributes of a regular file.
func attrOfInode(a client.InodeAttr) *client.Attr {
	return &client.Attr{
		Ino: a.Ino, Mode: fs.FileMode(a.Mode & 0o777), Nlink: a.Nlink, Uid: a.Uid, Gid: a.Gid, Size: int64(a.Size),
		Atime: time.Unix(0, a.Atime), Mtime: time.Unix(0, a.Mtime), Ctime: time.Unix(0, a.Ctime),
	}
}

// emptyDir reports whether directory p has no entries (the hidden working
// directory does not count).
func (g *Gateway) emptyDir(ctx context.Context, p string) (bool, error) {
	for e, err := range g.c.ReadDir(ctx, p) {
		if err != nil {
			return false, err
		}
		if e.Name == hiddenDir && strings.Count(p, "/") == 1 {
			continue
		}
		return false, nil
	}
	return true, nil
}

// uploadBody sets up the verified body of an upload (PUT, UploadPart) or
// of a request document: it decodes aws-chunked bodies and checks the
// length, Content-MD5, x-amz-content-sha256 and, if checksumHeaders,
// x-amz-checksum-* (CompleteMultipartUpload's describe the object, not
// the body).
func (g *Gateway) uploadBody(rq *request, maxSize int64, checksumHeaders bool) (*verifier, error) {
	r, h := rq.r, rq.r.Header
	var src io.Reader = r.Body
	want := r.ContentLength
	payload := rq.auth.PayloadHash
	var cr *chunkedReader
	switch payload {
	case payloadStreaming, payloadStreamingTrailer, payloadStreamingUnsignedTrail:
		dl := h.Get("X-Amz-Decoded-Content-Length")
		if dl == "" {
			return nil, apiErr(ErrMissingContentLength, "An aws-chunked upload must give x-amz-decoded-content-length")
		}
		n, ok := parseDigits(dl)
		if !ok {
			return nil, apiErr(ErrInvalidArgument, "x-amz-decoded-content-length %q is not a number", dl)
		}
		var signer *chunkSigner
		if payload != payloadStreamingUnsignedTrail {
			a := rq.auth
			signer = &chunkSigner{key: a.key, amzDate: a.amzDate, scope: a.cred.scope(), prevSig: a.signature}
		}
		cr = newChunkedReader(src, signer, payload == payloadStreamingTrailer)
		src, want = cr, n
	default:
		// want is -1 for a body sent with Transfer-Encoding: chunked
		// and no Content-Length: accepted, its length unknown until the
		// end (maxSize still holds).
	}
	if want > maxSize {
		return nil, apiErr(ErrEntityTooLarge, "Your proposed upload of %d bytes exceeds the maximum allowed size of %d bytes", want, maxSize)
	}
	v := &verifier{r: src, want: want, max: maxSize, md5: md5.New()}
	if vals, ok := h["Content-Md5"]; ok {
		// Present but empty is invalid too, as S3 says.
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(vals[0]))
		if err != nil || len(b) != md5.Size {
			return nil, apiErr(ErrInvalidDigest, "The Content-MD5 you specified is not valid.")
		}
		v.wantMD5 = b
	}
	if len(payload) == 64 {
		v.sha, v.wantSHA = sha256.New(), strings.ToLower(payload)
	}
	if tr := h.Get("X-Amz-Trailer"); tr != "" {
		alg := checksumFromHeader(tr)
		if alg == "" {
			return nil, apiErr(ErrXSluiceUnsupportedTrailer, "The trailing header %q is not supported: use x-amz-checksum-crc32, crc32c, crc64nvme, sha1 or sha256", tr)
		}
		if cr == nil {
			return nil, apiErr(ErrInvalidRequest, "x-amz-trailer needs an aws-chunked body (x-amz-content-sha256: STREAMING-...-TRAILER)")
		}
		v.ck, v.ckAlg = checksumAlgorithms[alg](), alg
		v.wantCK = func() (string, bool) { return cr.Trailer(tr) }
	}
	for name, vals := range h {
		lname := strings.ToLower(name)
		if !checksumHeaders || !strings.HasPrefix(lname, checksumHeaderPrefix) {
			continue
		}
		switch lname {
		case "x-amz-checksum-algorithm", "x-amz-checksum-type", "x-amz-checksum-mode":
			continue
		}
		alg := checksumFromHeader(lname)
		if alg == "" {
			return nil, apiErr(ErrInvalidRequest, "The checksum header %s is not supported", name)
		}
		if v.ck != nil {
			return nil, apiErr(ErrInvalidRequest, "Expecting a single x-amz-checksum- header. Multiple checksum types are not allowed.")
		}
		val := vals[0]
		v.ck, v.ckAlg = checksumAlgorithms[alg](), alg
		v.wantCK = func() (string, bool) { return val, true }
	}
	return v, nil
}

// readDocument reads and verifies a whole request document (XML bodies).
// checksumHeaders: whether x-amz-checksum-* headers are the body's.
func (g *Gateway) readDocument(rq *request, checksumHeaders bool) (io.Reader, error) {
	v, err := g.uploadBody(rq, maxXMLBody, checksumHeaders)
	if err != nil {
		if ae, ok := err.(*APIError); ok && ae.Code == ErrEntityTooLarge.Code {
			return nil, apiErr(ErrMaxMessageLengthExceeded, "Your request body is larger than %d bytes", maxXMLBody)
		}
		return nil, err
	}
	data, err := io.ReadAll(v)
	if err != nil {
		return nil, bodyErr(err)
	}
	return strings.NewReader(string(data)), nil
}

// bodyErr classifies an error from reading a request body.
func bodyErr(err error) error {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return apiErr(ErrEntityTooLarge, "Your proposed upload exceeds the maximum allowed size")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return wrapErr(ErrIncompleteBody, err, "You did not provide the number of bytes specified by the Content-Length HTTP header")
	}
	return wrapErr(ErrRequestTimeout, err, "Reading the request body failed: %v", err)
}

// createTemp creates a temporary file in the bucket for an upload.
func (g *Gateway) createTemp(ctx context.Context, bucket string) (string, *client.File, error) {
	for attempt := 0; ; attempt++ {
		p := g.temps.path(bucket)
		f, err := g.c.OpenFile(ctx, p, client.O_WRONLY|client.O_CREATE|client.O_EXCL, 0o644)
		if err == nil {
			return p, f, nil
		}
		g.temps.done(p)
		if errs.CodeOf(err) != errs.NotFound || attempt > 0 {
			return "", nil, fsErr(err, ErrNoSuchBucket, "a temporary file")
		}
		fi, serr := g.c.Stat(ctx, "/"+bucket)
		if serr != nil || !fi.IsDir() {
			return "", nil, apiErr(ErrNoSuchBucket, "The specified bucket does not exist")
		}
		if err := g.c.MkdirAll(ctx, parentDir(p), 0o755); err != nil {
			return "", nil, fsErr(err, ErrNoSuchBucket, "the bucket's temporary directory")
		}
	}
}

// staged is a temporary file whose data is all written and whose size and
// mtime are committed in the metadata, while Close, which makes the data
// durable, runs in the background. Committing it records the object's
// metadata on it meanwhile and waits for the data to be durable before the
// rename publishes the key (ADR 0006). Its owner either commits it or
// discards it; both wait for Close.
type staged struct {
	path string
	f    *client.File
	done chan struct{} // closed once err is final
	err  error         // Close's
}

// stage starts closing f, whose data is flushed.
func stage(path string, f *client.File) *staged {
	s := &staged{path: path, f: f, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = f.Close()
	}()
	return s
}

// durable waits until the staged file's data is durable (Close returned).
func (s *staged) durable() error {
	<-s.done
	return s.err
}

// discard waits for Close and removes the staged file.
func (g *Gateway) discard(ctx context.Context, s *staged) {
	s.durable()
	g.removeQuietly(ctx, s.path)
}

// writeTemp streams body into a new temporary file of the bucket, flushes
// it and stages it. On error the file is removed.
func (g *Gateway) writeTemp(ctx context.Context, bucket string, body io.Reader) (*staged, error) {
	tmp, f, err := g.createTemp(ctx, bucket)
	if err != nil {
		return nil, err
	}
	src := &sourceReader{r: body}
	_, err = copyStream(f, src)
	if err == nil {
		err = f.FlushContext(ctx)
	}
	if err != nil {
		f.Release(context.WithoutCancel(ctx), false)
		g.removeQuietly(ctx, tmp)
		if src.err != nil && err == src.err {
			return nil, bodyErr(err)
		}
		return nil, fsErr(err, ErrInternal, "a temporary file")
	}
	return stage(tmp, f), nil
}

// sourceReader remembers the error of the reader it wraps, so that a copy
// can tell a failed read (the client's body) from a failed write.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

func (g *Gateway) removeQuietly(ctx context.Context, p string) {
	if err := g.c.Remove(context.WithoutCancel(ctx), p); err != nil && !isNotExist(err) {
		g.log.Warn("s3: cannot remove a temporary file", "path", p, "err", err)
	}
	g.temps.done(p) // if the remove failed, the collector will retry it
}

// commit records meta on the staged temporary file and renames it to dst
// once its data is durable, creating dst's parent directories. noReplace
// fails with 412 if dst exists. It returns the new object's attributes. On
// error the temporary file is removed.
func (g *Gateway) commit(ctx context.Context, tmp *staged, dst string, meta *objectMeta, noReplace bool) (*client.Attr, error) {
	return g.commitTo(ctx, tmp, dst, meta, noReplace, true)
}

// commitTo is commit; mkParents says whether dst's parents may be created.
func (g *Gateway) commitTo(ctx context.Context, tmp *staged, dst string, meta *objectMeta, noReplace, mkParents bool) (*client.Attr, error) {
	a, err := g.recordMeta(ctx, tmp, meta)
	if err != nil {
		g.discard(ctx, tmp)
		return nil, err
	}
	if err := tmp.durable(); err != nil {
		g.removeQuietly(ctx, tmp.path)
		return nil, fsErr(err, ErrInternal, "a temporary file")
	}
	if err := g.renameInto(ctx, tmp.path, dst, noReplace, mkParents); err != nil {
		g.removeQuietly(ctx, tmp.path)
		return nil, err
	}
	g.temps.done(tmp.path)
	return a, nil
}

// recordMeta records meta, completed with the size and mtime it is valid
// for, on a staged file, by inode (while its Close runs: the flushed data
// has its final size and mtime). It returns the file's attributes.
func (g *Gateway) recordMeta(ctx context.Context, tmp *staged, meta *objectMeta) (*client.Attr, error) {
	ino := tmp.f.Ino()
	ia, err := g.c.GetAttrIno(ctx, ino)
	if err != nil {
		return nil, fsErr(err, ErrInternal, "a temporary file")
	}
	a := attrOfInode(ia)
	meta.Size, meta.Mtime = a.Size, ia.Mtime
	if err := g.c.SetXattrIno(ctx, ino, xattrMeta, meta.encode(), 0); err != nil {
		return nil, fsErr(err, ErrInternal, "a temporary file")
	}
	return a, nil
}

// renameInto renames src to dst, creating dst's parents (again, if a
// concurrent delete pruned them meanwhile).
func (g *Gateway) renameInto(ctx context.Context, src, dst string, noReplace, mkParents bool) error {
	what := "key " + strings.SplitN(dst, "/", 3)[2]
	for attempt := 0; ; attempt++ {
		var err error
		if noReplace {
			err = g.c.RenameNoReplace(ctx, src, dst)
		} else {
			err = g.c.Rename(ctx, src, dst)
		}
		if err == nil {
			return nil
		}
		switch errs.CodeOf(err) {
		case errs.NotFound:
			if attempt >= 3 || !mkParents {
				return fsErr(err, ErrInternal, what)
			}
			if merr := g.c.MkdirAll(ctx, parentDir(dst), 0o755); merr != nil && !isNotExist(merr) {
				return fsErr(merr, ErrInternal, what)
			}
		case errs.Exists:
			if fi, serr := g.c.Lstat(ctx, dst); noReplace && serr == nil && !fi.IsDir() {
				return apiErr(ErrPreconditionFailed, "At least one of the pre-conditions you specified did not hold: If-None-Match: * and the object exists")
			}
			return fsErr(err, ErrInternal, what)
		default:
			return fsErr(err, ErrInternal, what)
		}
	}
}

// putObject is PutObject: the body goes to a temporary file, which is
// renamed over the key when it is complete and verified.
func (g *Gateway) putObject(rq *request) error {
	h := rq.r.Header
	p, isDir, err := objectPath(rq.bucket, rq.key)
	if err != nil {
		return err
	}
	meta, err := metaFromRequest(h)
	if err != nil {
		return err
	}
	acl, err := aclFromHeaders(h, false)
	if err != nil {
		return err
	}
	meta.setACL(acl, rq.owner().ID)
	if meta.Tags, err = parseTaggingHeader(h.Get("X-Amz-Tagging")); err != nil {
		return err
	}
	if sc := h.Get("X-Amz-Storage-Class"); sc != "" && sc != "STANDARD" && sc != "REDUCED_REDUNDANCY" && sc != "STANDARD_IA" && sc != "INTELLIGENT_TIERING" {
		return apiErr(ErrInvalidStorageClass, "The storage class %q is not supported: objects are stored as STANDARD (other classes come only from lifecycle transitions)", sc)
	}
	v, err := g.uploadBody(rq, g.opts.MaxPutSize, true)
	if err != nil {
		return err
	}
	if isDir {
		return g.putDirObject(rq, p, v, meta)
	}
	noReplace, err := g.checkWriteConditions(rq)
	if err != nil {
		return err
	}
	var body io.Reader = v
	small := false
	if v.want >= 0 && v.want <= g.c.InlineMax() {
		// A small object in a bucket without versioning is one metadata
		// request (putSmall); the body is in memory anyway.
		if state, err := g.bucketVersioning(rq.ctx, rq.bucket); err != nil {
			return err
		} else if state == versioningOff {
			src := &sourceReader{r: v}
			data, err := io.ReadAll(src)
			if err != nil {
				if src.err != nil && err == src.err {
					return bodyErr(err)
				}
				return err
			}
			body, small = bytes.NewReader(data), true
			meta.ETag = v.etag()
			if v.ckValue != "" {
				meta.Checksum = map[string]string{v.ckAlg: v.ckValue}
			}
			done, err := g.putSmall(rq, p, data, meta, noReplace)
			if err != nil {
				return err
			}
			if done {
				return putReply(rq, meta, v)
			}
		}
	}
	tmp, err := g.writeTemp(rq.ctx, rq.bucket, body)
	if err != nil {
		return err
	}
	if !small {
		meta.ETag = v.etag()
		if v.ckValue != "" {
			meta.Checksum = map[string]string{v.ckAlg: v.ckValue}
		}
	}
	if _, err := g.commitObject(rq.ctx, rq.bucket, rq.key, tmp, meta, noReplace); err != nil {
		return err
	}
	// Durable before the 200 (ADR 0006): the key's publication is metadata.
	if err := g.c.SyncMeta(rq.ctx); err != nil {
		return fsErr(err, ErrInternal, "key "+rq.key)
	}
	return putReply(rq, meta, v)
}

// putSmall stores a small object of a bucket without versioning at p with
// one request to the metadata service (client.PutFile: the file, its
// bytes inline, its metadata xattr and the replacement of the old object,
// durable before the reply), making p's parent directories if missing.
// It returns false, and nothing is changed, if the object does not fit
// inline after all (the service's limit is lower than the client
// thought) or the service does not know PutFile: the caller writes it the
// usual way.
func (g *Gateway) putSmall(rq *request, p string, data []byte, meta *objectMeta, noReplace bool) (bool, error) {
	now := g.now()
	meta.Size, meta.Mtime = int64(len(data)), now.UnixNano()
	opts := client.PutOptions{
		Xattrs:    map[string][]byte{xattrMeta: meta.encode()},
		NoReplace: noReplace,
		Sync:      true, // durable before the 200 (ADR 0006)
		Mtime:     now,
	}
	what := "key " + rq.key
	for attempt := 0; ; attempt++ {
		_, err := g.c.PutFile(rq.ctx, p, data, 0o644, opts)
		switch code := errs.CodeOf(err); {
		case err == nil:
			return true, nil
		case code == errs.TooBig, code == errs.NotSupported:
			// Over the service's inline limit, or a service from
			// before OpPutFile.
			return false, nil
		case code == errs.Exists && noReplace:
			if fi, serr := g.c.Lstat(rq.ctx, p); serr == nil && !fi.IsDir() {
				return false, apiErr(ErrPreconditionFailed, "At least one of the pre-conditions you specified did not hold: If-None-Match: * and the object exists")
			}
			return false, fsErr(err, ErrInternal, what)
		case code == errs.NotFound && attempt < 3:
			if err := g.checkBucket(rq); err != nil {
				return false, err
			}
			if merr := g.c.MkdirAll(rq.ctx, parentDir(p), 0o755); merr != nil && !isNotExist(merr) {
				return false, fsErr(merr, ErrInternal, what)
			}
		default:
			return false, fsErr(err, ErrInternal, what)
		}
	}
}

// putReply answers a PutObject that stored meta.
func putReply(rq *request, meta *objectMeta, v *verifier) error {
	hdr := rq.w.Header()
	hdr.Set("ETag", `"`+meta.ETag+`"`)
	if meta.VersionID != "" {
		hdr.Set("X-Amz-Version-Id", meta.VersionID)
	}
	if v.ckValue != "" {
		hdr.Set(checksumHeaderPrefix+v.ckAlg, v.ckValue)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// putDirObject is PutObject of a key ending in '/': it makes the
// directory (and its parents) and marks it as an object. It can hold no
// data.
func (g *Gateway) putDirObject(rq *request, p string, v *verifier, meta *objectMeta) error {
	if v.want > 0 {
		return apiErr(ErrInvalidObjectName, "The key %q ends in '/' and so names a directory, which cannot hold data", rq.key)
	}
	n, err := io.Copy(io.Discard, v)
	if err != nil {
		return bodyErr(err)
	}
	if n > 0 {
		return apiErr(ErrInvalidObjectName, "The key %q ends in '/' and so names a directory, which cannot hold data", rq.key)
	}
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	if err := g.c.MkdirAll(rq.ctx, p, 0o755); err != nil {
		return fsErr(err, ErrNoSuchBucket, "key "+rq.key)
	}
	meta.ETag = emptyETag
	if err := g.c.SetXattr(rq.ctx, p, xattrMeta, meta.encode()); err != nil {
		return fsErr(err, ErrNoSuchKey, "key "+rq.key)
	}
	if err := g.c.SyncMeta(rq.ctx); err != nil { // durable before the 200 (ADR 0006)
		return fsErr(err, ErrInternal, "key "+rq.key)
	}
	rq.w.Header().Set("ETag", `"`+emptyETag+`"`)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// etagMatches evaluates an If-Match / If-None-Match list against etag.
func etagMatches(list, etag string) bool {
	for e := range strings.SplitSeq(list, ",") {
		e = strings.TrimSpace(e)
		e = strings.TrimPrefix(e, "W/")
		e = strings.Trim(e, `"`)
		if e == "*" || e == etag {
			return true
		}
	}
	return false
}

// writePreconditions evaluates If-Match and If-None-Match of a write
// (PutObject, CompleteMultipartUpload) against the object the key holds
// (exists false: none). If-None-Match with ETags fails (412) if one
// matches; "*" fails if the object exists, and noReplace then asks the
// rename to fail if one appears meanwhile (atomic). If-Match fails with
// 404 NoSuchKey if there is no object and 412 if no ETag matches.
func writePreconditions(h http.Header, exists bool, etag string) (noReplace bool, err error) {
	failed := func(which string) error {
		return apiErr(ErrPreconditionFailed, "At least one of the pre-conditions you specified did not hold: %s", which)
	}
	if inm := h.Get("If-None-Match"); inm != "" {
		noReplace = strings.TrimSpace(inm) == "*"
		if exists && etagMatches(inm, etag) {
			return false, failed("If-None-Match")
		}
	}
	if im := h.Get("If-Match"); im != "" {
		if !exists {
			return false, apiErr(ErrNoSuchKey, "The specified key does not exist: If-Match needs an object to match")
		}
		if !etagMatches(im, etag) {
			return false, failed("If-Match")
		}
	}
	return noReplace, nil
}

// checkWriteConditions is writePreconditions for a request, with the
// object of its key (stat only if the request has a condition).
func (g *Gateway) checkWriteConditions(rq *request) (noReplace bool, err error) {
	h := rq.r.Header
	if h.Get("If-None-Match") == "" && h.Get("If-Match") == "" {
		return false, nil
	}
	info, _, err := g.statObject(rq, rq.key)
	exists, etag := err == nil, ""
	if err != nil {
		if ae, ok := err.(*APIError); !ok || ae.Code != ErrNoSuchKey.Code {
			return false, err
		}
	} else {
		etag = info.etag
	}
	return writePreconditions(h, exists, etag)
}

// checkConditions evaluates the conditional headers of a read in the order
// of RFC 9110 section 13.2.2, as S3 does. prefix is "" for GET and HEAD,
// "X-Amz-Copy-Source-" for the source of a copy (where every failure is
// 412).
func checkConditions(h http.Header, prefix, etag string, mtime time.Time) error {
	failed := func(which string) error {
		return apiErr(ErrPreconditionFailed, "At least one of the pre-conditions you specified did not hold: %s", which)
	}
	mt := mtime.Truncate(time.Second)
	if im := h.Get(prefix + "If-Match"); im != "" {
		if !etagMatches(im, etag) {
			return failed(prefix + "If-Match")
		}
	} else if ius := h.Get(prefix + "If-Unmodified-Since"); ius != "" {
		if t, err := http.ParseTime(ius); err == nil && mt.After(t) {
			return failed(prefix + "If-Unmodified-Since")
		}
	}
	if inm := h.Get(prefix + "If-None-Match"); inm != "" {
		if etagMatches(inm, etag) {
			if prefix != "" {
				return failed(prefix + "If-None-Match")
			}
			return ErrNotModified
		}
	} else if ims := h.Get(prefix + "If-Modified-Since"); ims != "" {
		if t, err := http.ParseTime(ims); err == nil && !mt.After(t) {
			if prefix != "" {
				return failed(prefix + "If-Modified-Since")
			}
			return ErrNotModified
		}
	}
	return nil
}

// responseOverrides are the query parameters of a signed GET that set
// response headers.
var responseOverrides = map[string]string{
	"response-content-type":        "Content-Type",
	"response-content-language":    "Content-Language",
	"response-expires":             "Expires",
	"response-cache-control":       "Cache-Control",
	"response-content-disposition": "Content-Disposition",
	"response-content-encoding":    "Content-Encoding",
}

// getObject is GetObject and HeadObject.
func (g *Gateway) getObject(rq *request, head bool) error {
	for attempt := 0; ; attempt++ {
		err := g.getObjectOnce(rq, head)
		if err == errReplaced && attempt < 3 {
			continue
		}
		if err == errReplaced {
			return apiErr(ErrServiceUnavailable, "The object is being replaced; try again")
		}
		return err
	}
}

var errReplaced = errors.New("s3: object replaced while opening it")

func (g *Gateway) getObjectOnce(rq *request, head bool) error {
	info, f, err := g.readTargetFile(rq, !head)
	if f != nil {
		defer f.Close()
	}
	if err := g.authorizeObjectRead(rq, info, err); err != nil {
		return err
	}
	h := rq.w.Header()
	mtime := info.attr.Mtime
	h.Set("ETag", `"`+info.etag+`"`)
	h.Set("Last-Modified", mtime.UTC().Format(http.TimeFormat))
	if err := checkConditions(rq.r.Header, "", info.etag, mtime); err != nil {
		return err
	}
	size := info.attr.Size
	partN, err := readPartNumber(rq)
	if err != nil {
		return err
	}
	var rng byteRange
	var partial bool
	partsCount := 0
	if partN > 0 {
		// One part: 206 with its Content-Range, as S3 (200 for an empty
		// object, which has no range to name).
		rng, partsCount, err = partRange(g.objectPartSizes(rq, info), size, partN)
		if err != nil {
			return err
		}
		partial = size > 0
	} else {
		rng, partial, err = parseRange(rq.r.Header.Get("Range"), size)
		if err != nil {
			h.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
			return err
		}
		if !partial {
			rng = byteRange{Start: 0, Length: size}
		}
	}
	if !head && !info.dir && rng.Length > 0 && f == nil {
		// A version named by its ID: open the inode found, so that the
		// data matches the headers even if the key is replaced meanwhile
		// (inode numbers are not reused); once it is gone, the lookup
		// starts again.
		vf, _, err := g.c.OpenIno(rq.ctx, info.attr.Ino, client.O_RDONLY)
		if err != nil {
			if errs.CodeOf(err) == errs.NotFound {
				return errReplaced
			}
			return fsErr(err, ErrNoSuchKey, "key "+rq.key)
		}
		defer vf.Close()
		f = vf
	}
	info.meta.setHeaders(h)
	if c := info.meta.transitionClass(info.attr); c != "" {
		h.Set("X-Amz-Storage-Class", c) // S3 leaves it out for STANDARD
	}
	if !rq.auth.anonymous() {
		for q, hdr := range responseOverrides {
			if v := rq.query.Get(q); v != "" {
				h.Set(hdr, v)
			}
		}
	}
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(rng.Length, 10))
	setTaggingCount(h, info.meta.Tags)
	switch {
	case partN > 0 && info.meta.Parts > 0:
		h.Set("X-Amz-Mp-Parts-Count", strconv.Itoa(partsCount))
	case info.meta.Parts > 0:
		h.Set("X-Amz-Mp-Parts-Count", strconv.Itoa(info.meta.Parts))
	}
	if strings.EqualFold(rq.r.Header.Get("X-Amz-Checksum-Mode"), "ENABLED") && !partial {
		for alg, val := range info.meta.Checksum {
			h.Set(checksumHeaderPrefix+alg, val)
			h.Set("X-Amz-Checksum-Type", checksumType(val))
		}
	}
	status := http.StatusOK
	if partial {
		status = http.StatusPartialContent
		h.Set("Content-Range", "bytes "+strconv.FormatInt(rng.Start, 10)+"-"+strconv.FormatInt(rng.Start+rng.Length-1, 10)+"/"+strconv.FormatInt(size, 10))
	}
	rq.w.WriteHeader(status)
	if head || info.dir || rng.Length == 0 {
		return nil
	}
	n, err := sendRange(rq.ctx, rq.w, f, rng.Start, rng.Length)
	if err == nil && n != rng.Length {
		err = errs.New(errs.Stale, "s3: object %s shrank while it was read: %d of %d bytes", info.path, n, rng.Length)
	}
	return err
}

// deleteObject is DeleteObject: deleting a missing key succeeds, as in S3.
// With versionId it deletes that version; in a bucket with versioning,
// without one it leaves a delete marker (versions.go).
func (g *Gateway) deleteObject(rq *request) error {
	vids, hasVID := rq.query["versionId"]
	vid := ""
	if hasVID {
		vid = vids[0]
	}
	out, err := g.deleteAny(rq.ctx, rq.bucket, rq.key, vid, hasVID, rq.owner().ID)
	if err != nil {
		return err
	}
	out.setHeaders(rq.w.Header())
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteKey removes one object: a file, or for "dir/" keys the directory
// if it is empty, else only its object mark. Then it removes the
// directories the deletion left empty, up to the bucket (but not those
// created as "dir/" objects).
func (g *Gateway) deleteKey(ctx context.Context, bucket, key string) error {
	p, isDir, err := objectPath(bucket, key)
	if err != nil {
		return err
	}
	fi, err := g.c.Lstat(ctx, p)
	if err != nil {
		if c := errs.CodeOf(err); c == errs.NotFound || c == errs.NotDir {
			if bi, err := g.c.Stat(ctx, "/"+bucket); err != nil || !bi.IsDir() {
				return apiErr(ErrNoSuchBucket, "The specified bucket does not exist")
			}
			return nil
		}
		return fsErr(err, ErrNoSuchKey, "key "+key)
	}
	switch {
	case isDir && fi.IsDir():
		err := g.c.Remove(ctx, p)
		if errs.CodeOf(err) == errs.NotEmpty {
			err = g.c.RemoveXattr(ctx, p, xattrMeta)
			if c := errs.CodeOf(err); c == errs.NoData || c == errs.NotFound {
				err = nil
			}
			if err != nil {
				return fsErr(err, ErrNoSuchKey, "key "+key)
			}
			return nil
		}
		if err != nil && !isNotExist(err) {
			return fsErr(err, ErrNoSuchKey, "key "+key)
		}
	case !isDir && fi.Mode().IsRegular():
		if err := g.c.Remove(ctx, p); err != nil && !isNotExist(err) {
			return fsErr(err, ErrNoSuchKey, "key "+key)
		}
	default:
		return nil // not an object: nothing to delete
	}
	g.pruneEmptyDirs(ctx, bucket, parentDir(p))
	return nil
}

// pruneEmptyDirs removes dir and its parents below the bucket while they
// are empty and not "dir/" objects. Failures only stop it: a concurrent
// PUT may have just made the directory non-empty.
func (g *Gateway) pruneEmptyDirs(ctx context.Context, bucket, dir string) {
	root := "/" + bucket
	for strings.HasPrefix(dir, root+"/") {
		if _, err := g.c.GetXattr(ctx, dir, xattrMeta); err == nil || errs.CodeOf(err) != errs.NoData {
			return
		}
		if err := g.c.Remove(ctx, dir); err != nil {
			return
		}
		dir = parentDir(dir)
	}
}

// parseCopySource parses x-amz-copy-source: [/]bucket/key[?versionId=V];
// vid is "" without a version.
func parseCopySource(v string) (bucket, key, vid string, err error) {
	src, err := url.PathUnescape(v)
	if err != nil {
		return "", "", "", apiErr(ErrInvalidCopySource, "x-amz-copy-source is not valid URL encoding")
	}
	if i := strings.Index(src, "?versionId="); i >= 0 {
		vid = src[i+len("?versionId="):]
		if !validVersionID(vid) {
			return "", "", "", apiErr(ErrInvalidArgument, "Invalid version id specified")
		}
		src = src[:i]
	}
	src = strings.TrimPrefix(src, "/")
	bucket, key, ok := strings.Cut(src, "/")
	if !ok || bucket == "" || key == "" {
		return "", "", "", apiErr(ErrInvalidCopySource, "Copy Source must mention the source bucket and key: sourcebucket/sourcekey")
	}
	if !validBucketName(bucket) {
		return "", "", "", apiErr(ErrNoSuchBucket, "The specified source bucket does not exist")
	}
	return bucket, key, vid, nil
}

// copySource finds the source of a copy: the current object, or the
// version named. A delete marker cannot be copied.
func (g *Gateway) copySource(ctx context.Context, bucket, key, vid string) (*objInfo, error) {
	if vid == "" {
		info, _, err := g.statObjectIn(ctx, bucket, key)
		return info, err
	}
	info, err := g.statVersion(ctx, bucket, key, vid)
	if err != nil {
		return nil, err
	}
	if info.meta.DeleteMarker {
		return nil, apiErr(ErrInvalidRequest, "The source of a copy request may not specifically refer to a delete marker by version id.")
	}
	return info, nil
}

// copyObject is CopyObject, with the COPY (default) or REPLACE metadata
// directive. The data is copied through the gateway into a new file; a
// copy of an object onto itself with REPLACE only rewrites its metadata.
func (g *Gateway) copyObject(rq *request) error {
	h := rq.r.Header
	sb, sk, svid, err := parseCopySource(h.Get("X-Amz-Copy-Source"))
	if err != nil {
		return err
	}
	dst, isDir, err := objectPath(rq.bucket, rq.key)
	if err != nil {
		return err
	}
	if isDir {
		return apiErr(ErrInvalidObjectName, "The destination key %q ends in '/' and so names a directory, which cannot hold a copy", rq.key)
	}
	directive := h.Get("X-Amz-Metadata-Directive")
	if directive != "" && directive != "COPY" && directive != "REPLACE" {
		return apiErr(ErrInvalidArgument, "Unknown metadata directive %q: use COPY or REPLACE", directive)
	}
	acl, err := aclFromHeaders(h, false)
	if err != nil {
		return err
	}
	var newMeta *objectMeta
	if directive == "REPLACE" {
		if newMeta, err = metaFromRequest(h); err != nil {
			return err
		}
	}
	tagDirective := h.Get("X-Amz-Tagging-Directive")
	if tagDirective != "" && tagDirective != "COPY" && tagDirective != "REPLACE" {
		return apiErr(ErrInvalidArgument, "Unknown tagging directive %q: use COPY or REPLACE", tagDirective)
	}
	newTags, err := parseTaggingHeader(h.Get("X-Amz-Tagging"))
	if err != nil {
		return err
	}
	src, err := g.copySource(rq.ctx, sb, sk, svid)
	if err != nil {
		return err
	}
	if src.dir {
		return apiErr(ErrInvalidRequest, "Copying a directory object (a key ending in '/') is not supported by Sluice")
	}
	if err := checkConditions(h, "X-Amz-Copy-Source-", src.etag, src.attr.Mtime); err != nil {
		return err
	}
	if newMeta == nil {
		newMeta = src.meta.copyMeta()
	}
	newMeta.setACL(acl, rq.owner().ID)
	newMeta.Tags = src.meta.Tags
	if tagDirective == "REPLACE" {
		newMeta.Tags = newTags
	}
	if svid != "" {
		rq.w.Header().Set("X-Amz-Copy-Source-Version-Id", svid)
	}
	state, err := g.bucketVersioning(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	if src.path == dst && state != versioningEnabled {
		if directive != "REPLACE" {
			return apiErr(ErrInvalidRequest, "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
		}
		return g.replaceMeta(rq, src, newMeta)
	}
	if src.attr.Size > g.opts.MaxPutSize {
		return apiErr(ErrInvalidRequest, "The specified copy source is larger than the maximum allowable size for a copy source: %d", g.opts.MaxPutSize)
	}
	return g.longOp(rq, func() (any, error) {
		etag, a, err := g.copyRange(rq.ctx, src, byteRange{0, src.attr.Size}, rq.bucket, func(tmp *staged, etag string) (*client.Attr, error) {
			newMeta.ETag = etag
			return g.commitObject(rq.ctx, rq.bucket, rq.key, tmp, newMeta, false)
		})
		if err != nil {
			return nil, err
		}
		return copyObjectResult{Xmlns: s3Namespace, ETag: `"` + etag + `"`, LastModified: s3Time(a.Mtime), versionID: newMeta.VersionID}, nil
	})
}

// copyRange streams a range of src into a temporary file of bucket,
// computing its MD5, and hands the staged file to finish, which commits it.
func (g *Gateway) copyRange(ctx context.Context, src *objInfo, rng byteRange, bucket string, finish func(tmp *staged, etag string) (*client.Attr, error)) (string, *client.Attr, error) {
	in, err := g.c.Open(ctx, src.path)
	if err != nil {
		return "", nil, fsErr(err, ErrNoSuchKey, "the copy source")
	}
	defer in.Close()
	if in.Ino() != src.attr.Ino {
		return "", nil, apiErr(ErrServiceUnavailable, "The copy source was replaced while it was opened; try again")
	}
	sum := md5.New()
	body := &countingReader{r: io.TeeReader(io.NewSectionReader(in, rng.Start, rng.Length), sum)}
	tmp, err := g.writeTemp(ctx, bucket, body)
	if err != nil {
		return "", nil, err
	}
	if body.n != rng.Length {
		g.discard(ctx, tmp)
		return "", nil, apiErr(ErrServiceUnavailable, "The copy source changed while it was copied; try again")
	}
	etag := hex.EncodeToString(sum.Sum(nil))
	a, err := finish(tmp, etag)
	return etag, a, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// replaceMeta is CopyObject of an object onto itself with REPLACE: new
// metadata and a new Last-Modified, the same data and ETag.
func (g *Gateway) replaceMeta(rq *request, src *objInfo, m *objectMeta) error {
	now := g.now()
	if err := g.c.Chtimes(rq.ctx, src.path, now, now); err != nil {
		return fsErr(err, ErrNoSuchKey, "key "+rq.key)
	}
	fi, err := g.c.Lstat(rq.ctx, src.path)
	if err != nil {
		return fsErr(err, ErrNoSuchKey, "key "+rq.key)
	}
	a := fi.Attr()
	m.ETag, m.Size, m.Mtime, m.Checksum, m.Parts = src.etag, a.Size, a.Mtime.UnixNano(), src.meta.Checksum, src.meta.Parts
	m.VersionID = src.meta.VersionID
	if err := g.c.SetXattr(rq.ctx, src.path, xattrMeta, m.encode()); err != nil {
		return fsErr(err, ErrNoSuchKey, "key "+rq.key)
	}
	return writeXML(rq, copyObjectResult{Xmlns: s3Namespace, ETag: `"` + src.etag + `"`, LastModified: s3Time(a.Mtime)})
}

// deleteObjects is DeleteObjects: up to 1000 keys, deleted 16 at a time;
// results in request order.
func (g *Gateway) deleteObjects(rq *request) error {
	body, err := g.readDocument(rq, true)
	if err != nil {
		return err
	}
	var req deleteRequest
	if _, err := decodeXML(body, &req, false); err != nil {
		return err
	}
	if len(req.Objects) == 0 || len(req.Objects) > 1000 {
		return apiErr(ErrMalformedXML, "DeleteObjects takes 1 to 1000 keys, got %d", len(req.Objects))
	}
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	errsOut := make([]error, len(req.Objects))
	outs := make([]deleteOutcome, len(req.Objects))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, o := range req.Objects {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if o.VersionID != "" && rq.auth.anonymous() {
				errsOut[i] = errAnonymousDenied() // deleting a version for good is the owner's
				return
			}
			outs[i], errsOut[i] = g.deleteAny(rq.ctx, rq.bucket, o.Key, o.VersionID, o.VersionID != "", rq.owner().ID)
		})
	}
	wg.Wait()
	res := deleteResult{Xmlns: s3Namespace}
	for i, o := range req.Objects {
		if err := errsOut[i]; err != nil {
			ae, ok := err.(*APIError)
			if !ok {
				ae = fsErr(err, ErrInternal, "key "+o.Key)
			}
			res.Errors = append(res.Errors, deleteError{Key: o.Key, VersionID: o.VersionID, Code: ae.Code, Message: ae.Message})
			continue
		}
		if !req.Quiet {
			d := deletedEntry{Key: o.Key, VersionID: o.VersionID, DeleteMarker: outs[i].marker}
			if outs[i].marker {
				d.DeleteMarkerVersionID = outs[i].versionID
			}
			res.Deleted = append(res.Deleted, d)
		}
	}
	return writeXML(rq, res)
}

// Long operations (CompleteMultipartUpload, CopyObject, UploadPartCopy)
// start a 200 response after keepaliveAfter and send a space every
// keepaliveEvery until they finish, as S3 does, so that clients do not time
// out; an error then goes in the 200 response's body, which SDKs check.
var (
	keepaliveAfter = 5 * time.Second
	keepaliveEvery = 5 * time.Second
)

func (g *Gateway) longOp(rq *request, fn func() (any, error)) error {
	var res any
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				g.log.Error("s3: panic in a long operation", "panic", p)
				err = apiErr(ErrInternal, "%s", ErrInternal.Message)
			}
		}()
		res, err = fn()
	}()
	timer := time.NewTimer(keepaliveAfter)
	defer timer.Stop()
	select {
	case <-done:
		if err != nil {
			return err
		}
		if hs, ok := res.(interface{ responseHeaders(http.Header) }); ok {
			hs.responseHeaders(rq.w.Header())
		}
		return writeXML(rq, res)
	case <-timer.C:
	}
	rq.w.Header().Set("Content-Type", "application/xml")
	rq.w.WriteHeader(http.StatusOK)
	io.WriteString(rq.w, xml.Header)
	rq.w.Flush()
	tick := time.NewTicker(keepaliveEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			if err != nil {
				ae, ok := err.(*APIError)
				if !ok {
					ae = fsErr(err, ErrInternal, "the object")
				}
				g.log.Warn("s3: long operation failed after the response started", "id", rq.id, "code", ae.Code, "err", err)
				return xml.NewEncoder(rq.w).Encode(errorBody{Code: ae.Code, Message: ae.Message, Resource: rq.r.URL.Path, RequestID: rq.id, HostID: rq.id})
			}
			return xml.NewEncoder(rq.w).Encode(res)
		case <-tick.C:
			rq.w.Write([]byte(" "))
			rq.w.Flush()
		}
	}
}
