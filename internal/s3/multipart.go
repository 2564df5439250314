package s3

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// Multipart uploads live in the bucket's working directory:
//
//	/<bucket>/.sluice-s3/uploads/<uploadId>/            xattr user.s3.upload: uploadInfo
//	/<bucket>/.sluice-s3/uploads/<uploadId>/part-00001  one file per part, xattr user.s3.meta
//
// Each part is streamed into a temporary file and renamed into place, so a
// part is either complete or absent and re-uploading a part replaces it.
// CompleteMultipartUpload streams the parts, in order, into one new
// temporary file, which is renamed over the key: the data is written once
// by UploadPart and copied once by Complete (there is no server-side
// concatenation in the file system), then the parts are removed.

const maxParts = 10000

// uploadInfo is what CreateMultipartUpload records for Complete.
type uploadInfo struct {
	Key       string      `json:"key"`
	Initiated int64       `json:"initiated"` // ns
	Meta      *objectMeta `json:"meta"`
	Checksum  string      `json:"checksum,omitempty"` // x-amz-checksum-algorithm
	// ChecksumType is x-amz-checksum-type: COMPOSITE, FULL_OBJECT or "".
	ChecksumType string `json:"checksum_type,omitempty"`
}

func uploadsDir(bucket string) string { return "/" + bucket + "/" + hiddenDir + "/uploads" }

func uploadDir(bucket, id string) string { return uploadsDir(bucket) + "/" + id }

func partPath(bucket, id string, n int) string {
	return fmt.Sprintf("%s/part-%05d", uploadDir(bucket, id), n)
}

// validUploadID reports whether id could be one of ours (32 hex digits):
// anything else would be a path.
func validUploadID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

func (g *Gateway) createMultipartUpload(rq *request) error {
	_, isDir, err := objectPath(rq.bucket, rq.key)
	if err != nil {
		return err
	}
	if isDir {
		return apiErr(ErrInvalidObjectName, "The key %q ends in '/' and so names a directory, which cannot hold data", rq.key)
	}
	meta, err := metaFromRequest(rq.r.Header)
	if err != nil {
		return err
	}
	acl, err := aclFromHeaders(rq.r.Header, false)
	if err != nil {
		return err
	}
	meta.setACL(acl, rq.owner().ID)
	if meta.Tags, err = parseTaggingHeader(rq.r.Header.Get("X-Amz-Tagging")); err != nil {
		return err
	}
	info := uploadInfo{Key: rq.key, Initiated: g.now().UnixNano(), Meta: meta}
	if alg := rq.r.Header.Get("X-Amz-Checksum-Algorithm"); alg != "" {
		if _, ok := checksumAlgorithms[strings.ToLower(alg)]; !ok {
			return apiErr(ErrInvalidRequest, "Checksum algorithm %q is not supported", alg)
		}
		info.Checksum = strings.ToUpper(alg)
	}
	if t := strings.ToUpper(rq.r.Header.Get("X-Amz-Checksum-Type")); t != "" {
		if t != checksumComposite && t != checksumFullObject {
			return apiErr(ErrInvalidRequest, "Value for x-amz-checksum-type header is invalid: %q", t)
		}
		if info.Checksum == "" {
			return apiErr(ErrInvalidRequest, "x-amz-checksum-type needs x-amz-checksum-algorithm")
		}
		info.ChecksumType = t
	}
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	id := randomHex(16)
	dir := uploadDir(rq.bucket, id)
	if err := g.c.MkdirAll(rq.ctx, dir, 0o755); err != nil {
		return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
	}
	b, _ := json.Marshal(info)
	if err := g.c.SetXattr(rq.ctx, dir, xattrUpload, b); err != nil {
		return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
	}
	if info.Checksum != "" {
		rq.w.Header().Set("X-Amz-Checksum-Algorithm", info.Checksum)
	}
	if info.ChecksumType != "" {
		rq.w.Header().Set("X-Amz-Checksum-Type", info.ChecksumType)
	}
	return writeXML(rq, initiateMultipartUploadResult{Xmlns: s3Namespace, Bucket: rq.bucket, Key: rq.key, UploadID: id})
}

// upload returns the upload named by the uploadId parameter, which must
// be for the request's key.
func (g *Gateway) upload(rq *request) (string, *uploadInfo, error) {
	id := rq.query.Get("uploadId")
	noUpload := apiErr(ErrNoSuchUpload, "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.")
	if !validUploadID(id) {
		return "", nil, noUpload
	}
	b, err := g.c.GetXattr(rq.ctx, uploadDir(rq.bucket, id), xattrUpload)
	if err != nil {
		if c := errs.CodeOf(err); c == errs.NotFound || c == errs.NoData || c == errs.NotDir {
			if err := g.checkBucket(rq); err != nil {
				return "", nil, err
			}
			return "", nil, noUpload
		}
		return "", nil, fsErr(err, ErrNoSuchUpload, "upload "+id)
	}
	var info uploadInfo
	if err := json.Unmarshal(b, &info); err != nil || info.Key != rq.key {
		return "", nil, noUpload
	}
	if info.Meta == nil {
		info.Meta = &objectMeta{}
	}
	return id, &info, nil
}

func partNumber(rq *request) (int, error) {
	n, err := strconv.Atoi(rq.query.Get("partNumber"))
	if err != nil || n < 1 || n > maxParts {
		return 0, apiErr(ErrInvalidArgument, "Part number must be an integer between 1 and 10000, inclusive")
	}
	return n, nil
}

func (g *Gateway) uploadPart(rq *request) error {
	n, err := partNumber(rq)
	if err != nil {
		return err
	}
	id, info, err := g.upload(rq)
	if err != nil {
		return err
	}
	v, err := g.uploadBody(rq, g.opts.MaxPutSize, true)
	if err != nil {
		return err
	}
	if info.Checksum != "" {
		v.computeChecksum(strings.ToLower(info.Checksum))
	}
	tmp, err := g.writeTemp(rq.ctx, rq.bucket, v)
	if err != nil {
		return err
	}
	meta := &objectMeta{ETag: v.etag()}
	if v.ckValue != "" {
		meta.Checksum = map[string]string{v.ckAlg: v.ckValue}
	}
	if _, err := g.commitTo(rq.ctx, tmp, partPath(rq.bucket, id, n), meta, false, false); err != nil {
		if ae, ok := err.(*APIError); ok && ae.Code == ErrInternal.Code && isNotExist(ae.Err) {
			return apiErr(ErrNoSuchUpload, "The specified upload does not exist: it was aborted or completed meanwhile")
		}
		return err
	}
	rq.w.Header().Set("ETag", `"`+meta.ETag+`"`)
	if v.ckValue != "" {
		rq.w.Header().Set(checksumHeaderPrefix+v.ckAlg, v.ckValue)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (g *Gateway) uploadPartCopy(rq *request) error {
	n, err := partNumber(rq)
	if err != nil {
		return err
	}
	id, _, err := g.upload(rq)
	if err != nil {
		return err
	}
	h := rq.r.Header
	sb, sk, svid, err := parseCopySource(h.Get("X-Amz-Copy-Source"))
	if err != nil {
		return err
	}
	src, err := g.copySource(rq.ctx, sb, sk, svid)
	if err != nil {
		return err
	}
	if svid != "" {
		rq.w.Header().Set("X-Amz-Copy-Source-Version-Id", svid)
	}
	if src.dir {
		return apiErr(ErrInvalidRequest, "Copying a directory object (a key ending in '/') is not supported by Sluice")
	}
	if err := checkConditions(h, "X-Amz-Copy-Source-", src.etag, src.attr.Mtime); err != nil {
		return err
	}
	rng := byteRange{Start: 0, Length: src.attr.Size}
	if cr := h.Get("X-Amz-Copy-Source-Range"); cr != "" {
		if rng, err = parseCopyRange(cr, src.attr.Size); err != nil {
			return err
		}
	}
	if rng.Length > g.opts.MaxPutSize {
		return apiErr(ErrEntityTooLarge, "A part can be at most %d bytes", g.opts.MaxPutSize)
	}
	return g.longOp(rq, func() (any, error) {
		etag, a, err := g.copyRange(rq.ctx, src, rng, rq.bucket, func(tmp *staged, etag string) (*client.Attr, error) {
			return g.commitTo(rq.ctx, tmp, partPath(rq.bucket, id, n), &objectMeta{ETag: etag}, false, false)
		})
		if err != nil {
			return nil, err
		}
		return copyPartResult{Xmlns: s3Namespace, ETag: `"` + etag + `"`, LastModified: s3Time(a.Mtime)}, nil
	})
}

// partFile is one stored part.
type partFile struct {
	n        int
	path     string
	etag     string
	size     int64
	mtime    time.Time
	checksum map[string]string
}

// parts lists an upload's parts in part-number order, after marker.
func (g *Gateway) parts(rq *request, id string, marker, limit int) ([]partFile, bool, error) {
	var out []partFile
	for e, err := range g.c.ReadDir(rq.ctx, uploadDir(rq.bucket, id)) {
		if err != nil {
			return nil, false, fsErr(err, ErrNoSuchUpload, "upload "+id)
		}
		numStr, ok := strings.CutPrefix(e.Name, "part-")
		if !ok || !e.Mode.IsRegular() {
			continue
		}
		n, err := strconv.Atoi(numStr)
		if err != nil || n <= marker {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		p, err := g.part(rq, id, n)
		if err != nil {
			continue // replaced or removed meanwhile
		}
		out = append(out, *p)
	}
	return out, false, nil
}

// part returns one stored part.
func (g *Gateway) part(rq *request, id string, n int) (*partFile, error) {
	p := partPath(rq.bucket, id, n)
	fi, err := g.c.Lstat(rq.ctx, p)
	if err != nil {
		return nil, err
	}
	b, err := g.c.GetXattr(rq.ctx, p, xattrMeta)
	if err != nil {
		return nil, err
	}
	m, ok := decodeMeta(b)
	if !ok {
		return nil, errs.New(errs.Corruption, "s3: part %s has unreadable metadata", p)
	}
	return &partFile{n: n, path: p, etag: m.ETag, size: fi.Size(), mtime: fi.ModTime(), checksum: m.Checksum}, nil
}

func (g *Gateway) listParts(rq *request) error {
	id, _, err := g.upload(rq)
	if err != nil {
		return err
	}
	marker, limit := 0, 1000
	if v := rq.query.Get("part-number-marker"); v != "" {
		if marker, err = strconv.Atoi(v); err != nil || marker < 0 {
			return apiErr(ErrInvalidArgument, "part-number-marker must be a non-negative integer")
		}
	}
	if v := rq.query.Get("max-parts"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 0 {
			return apiErr(ErrInvalidArgument, "max-parts must be a non-negative integer")
		}
		limit = min(limit, 1000)
	}
	parts, truncated, err := g.parts(rq, id, marker, limit)
	if err != nil {
		return err
	}
	res := listPartsResult{Xmlns: s3Namespace, Bucket: rq.bucket, Key: rq.key, UploadID: id, Initiator: rq.owner(), Owner: rq.owner(),
		StorageClass: "STANDARD", PartNumberMarker: marker, MaxParts: limit, IsTruncated: truncated}
	for _, p := range parts {
		pr := partResult{PartNumber: p.n, LastModified: s3Time(p.mtime), ETag: `"` + p.etag + `"`, Size: p.size}
		for alg, v := range p.checksum {
			pr.setChecksum(alg, v)
		}
		res.Parts = append(res.Parts, pr)
		res.NextPartNumberMarker = p.n
	}
	return writeXML(rq, res)
}

// completeParts checks the part list of a CompleteMultipartUpload: 1 to
// 10,000 parts in ascending order of part number. A part listed twice in a
// row is accepted, the last entry counting, as S3 does.
func completeParts(req *completeRequest) ([]completePart, error) {
	if len(req.Parts) == 0 {
		return nil, apiErr(ErrMalformedXML, "You must specify at least one part")
	}
	if len(req.Parts) > maxParts {
		return nil, apiErr(ErrMalformedXML, "You can specify at most %d parts", maxParts)
	}
	out := make([]completePart, 0, len(req.Parts))
	for _, p := range req.Parts {
		if p.PartNumber < 1 || p.PartNumber > maxParts {
			return nil, apiErr(ErrInvalidPart, "Part number %d is not between 1 and 10000", p.PartNumber)
		}
		if n := len(out); n > 0 {
			switch last := out[n-1].PartNumber; {
			case p.PartNumber == last:
				out[n-1] = p
				continue
			case p.PartNumber < last:
				return nil, apiErr(ErrInvalidPartOrder, "The list of parts was not in ascending order. Parts must be ordered by part number.")
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// completeResult is the answer to a CompleteMultipartUpload of key, also
// to a repeated one.
func completeResult(rq *request, etag string, checksum map[string]string) completeMultipartUploadResult {
	loc := "http://" + rq.r.Host + "/" + rq.bucket + "/" + awsURIEncode(rq.key, true)
	res := completeMultipartUploadResult{Xmlns: s3Namespace, Location: loc, Bucket: rq.bucket, Key: rq.key, ETag: `"` + etag + `"`}
	for alg, v := range checksum {
		res.setChecksum(alg, v)
		res.ChecksumType = checksumType(v)
	}
	return res
}

// completedUpload answers a CompleteMultipartUpload of an upload that is
// gone: if the key holds the object that upload made, the result is the
// same as the first time (S3 answers a repeated Complete so).
func (g *Gateway) completedUpload(rq *request) (*completeMultipartUploadResult, bool) {
	id := rq.query.Get("uploadId")
	if !validUploadID(id) {
		return nil, false
	}
	info, _, err := g.statObject(rq, rq.key)
	if err != nil || info.meta.UploadID != id || info.etag != info.meta.ETag {
		return nil, false
	}
	res := completeResult(rq, info.meta.ETag, info.meta.Checksum)
	res.versionID = info.meta.VersionID
	return &res, true
}

func (g *Gateway) completeMultipartUpload(rq *request) error {
	body, err := g.readDocument(rq, false)
	if err != nil {
		return err
	}
	var req completeRequest
	if _, err := decodeXML(body, &req, false); err != nil {
		return err
	}
	reqParts, err := completeParts(&req)
	if err != nil {
		return err
	}
	h := rq.r.Header
	id, info, err := g.upload(rq)
	if err != nil {
		if res, ok := g.completedUpload(rq); ok {
			res.responseHeaders(rq.w.Header())
			return writeXML(rq, res)
		}
		return err
	}
	if _, _, err := objectPath(rq.bucket, rq.key); err != nil {
		return err
	}
	noReplace, err := g.checkWriteConditions(rq)
	if err != nil {
		return err
	}
	// The checksums to compute while the parts stream: the upload's
	// algorithm, the one of an object checksum given now, and those of
	// the parts' checksums listed.
	ckType := info.ChecksumType
	if t := h.Get("X-Amz-Checksum-Type"); t != "" {
		ckType = strings.ToUpper(t)
	}
	sent := map[string]string{}
	for name, vals := range h {
		if alg := checksumFromHeader(name); alg != "" {
			sent[alg] = vals[0]
		}
	}
	cks := map[string]*multipartChecksum{}
	need := func(alg string) {
		if cks[alg] == nil {
			cks[alg] = newMultipartChecksum(alg)
		}
	}
	if info.Checksum != "" {
		need(strings.ToLower(info.Checksum))
	}
	for alg := range sent {
		need(alg)
	}
	for _, rp := range reqParts {
		for alg := range rp.checksums() {
			need(alg)
		}
	}
	parts := make([]*partFile, len(reqParts))
	sums := md5.New()
	for i, rp := range reqParts {
		p, err := g.part(rq, id, rp.PartNumber)
		if err != nil {
			return apiErr(ErrInvalidPart, "Part %d was not uploaded", rp.PartNumber)
		}
		if strings.Trim(rp.ETag, `" `) != p.etag {
			return apiErr(ErrInvalidPart, "Part %d has ETag %q, not %q", rp.PartNumber, p.etag, rp.ETag)
		}
		if i < len(reqParts)-1 && p.size < g.opts.MinPartSize {
			return apiErr(ErrEntityTooSmall, "Part %d is %d bytes; every part but the last must be at least %d bytes", rp.PartNumber, p.size, g.opts.MinPartSize)
		}
		b, err := hex.DecodeString(p.etag)
		if err != nil {
			return apiErr(ErrInvalidPart, "Part %d has an unreadable ETag", rp.PartNumber)
		}
		sums.Write(b)
		parts[i] = p
	}
	etag := fmt.Sprintf("%s-%d", hex.EncodeToString(sums.Sum(nil)), len(parts))
	return g.longOp(rq, func() (any, error) {
		tmp, f, err := g.createTemp(rq.ctx, rq.bucket)
		if err != nil {
			return nil, err
		}
		fail := func(err error) (any, error) {
			f.Release(context.WithoutCancel(rq.ctx), false)
			g.removeQuietly(rq.ctx, tmp)
			return nil, err
		}
		var dstW io.Writer = f
		if len(cks) > 0 {
			ws := []io.Writer{f}
			for _, c := range cks {
				ws = append(ws, c)
			}
			dstW = io.MultiWriter(ws...)
		}
		for _, p := range parts {
			in, err := g.c.Open(rq.ctx, p.path)
			if err != nil {
				if res, ok := g.completedUpload(rq); ok {
					f.Release(context.WithoutCancel(rq.ctx), false)
					g.removeQuietly(rq.ctx, tmp)
					return res, nil // a concurrent Complete finished it
				}
				return fail(apiErr(ErrInvalidPart, "Part %d went away while the upload was completed", p.n))
			}
			n, err := copyStream(dstW, io.LimitReader(in, p.size))
			in.Close()
			if err == nil && n != p.size {
				err = errs.New(errs.Stale, "s3: part %s changed while it was copied", p.path)
			}
			if err != nil {
				return fail(fsErr(err, ErrInternal, "part "+strconv.Itoa(p.n)))
			}
			for _, c := range cks {
				c.endPart()
			}
		}
		// The checksums listed per part, then the object's.
		for i, rp := range reqParts {
			for alg, v := range rp.checksums() {
				if got := cks[alg].parts[i]; got != v {
					return fail(apiErr(ErrInvalidPart, "The %s checksum of part %d is %s, not %s", strings.ToUpper(alg), rp.PartNumber, got, v))
				}
			}
		}
		checksum := map[string]string{}
		for alg, v := range sent {
			rec, err := matchObjectChecksum(v, ckType, cks[alg].composite(), cks[alg].full())
			if err != nil {
				return fail(err)
			}
			checksum[alg] = rec
		}
		if alg := strings.ToLower(info.Checksum); alg != "" && checksum[alg] == "" {
			if ckType == checksumFullObject || alg == "crc64nvme" {
				checksum[alg] = cks[alg].full()
			} else {
				checksum[alg] = cks[alg].composite()
			}
		}
		if len(checksum) == 0 {
			checksum = nil
		}
		if err := f.FlushContext(rq.ctx); err != nil {
			return fail(fsErr(err, ErrInternal, "key "+rq.key))
		}
		st := stage(tmp, f)
		sizes := make([]int64, len(parts))
		for i, p := range parts {
			sizes[i] = p.size
		}
		if err := g.c.SetXattrIno(rq.ctx, f.Ino(), xattrParts, encodePartSizes(sizes), 0); err != nil {
			g.discard(rq.ctx, st)
			return nil, fsErr(err, ErrInternal, "key "+rq.key)
		}
		meta := info.Meta
		meta.ETag, meta.Parts, meta.Checksum, meta.UploadID = etag, len(parts), checksum, id
		if _, err := g.commitObject(rq.ctx, rq.bucket, rq.key, st, meta, noReplace); err != nil {
			return nil, err
		}
		// Durable before the 200 (ADR 0006): the key's publication is metadata.
		if err := g.c.SyncMeta(rq.ctx); err != nil {
			return nil, fsErr(err, ErrInternal, "key "+rq.key)
		}
		if err := g.c.RemoveAll(rq.ctx, uploadDir(rq.bucket, id)); err != nil {
			g.log.Warn("s3: cannot remove a completed upload's parts", "upload", id, "err", err)
		}
		res := completeResult(rq, etag, checksum)
		res.versionID = meta.VersionID
		return res, nil
	})
}

func (g *Gateway) abortMultipartUpload(rq *request) error {
	id, _, err := g.upload(rq)
	if err != nil {
		return err
	}
	if err := g.c.RemoveAll(rq.ctx, uploadDir(rq.bucket, id)); err != nil {
		return fsErr(err, ErrNoSuchUpload, "upload "+id)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (g *Gateway) listMultipartUploads(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	q := rq.query
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	keyMarker, idMarker := q.Get("key-marker"), q.Get("upload-id-marker")
	limit := 1000
	if v := q.Get("max-uploads"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apiErr(ErrInvalidArgument, "max-uploads must be a non-negative integer")
		}
		limit = min(n, 1000)
	}
	type up struct {
		id   string
		info uploadInfo
	}
	var ups []up
	for e, err := range g.c.ReadDir(rq.ctx, uploadsDir(rq.bucket)) {
		if err != nil {
			if isNotExist(err) {
				break
			}
			return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
		}
		if !validUploadID(e.Name) {
			continue
		}
		b, err := g.c.GetXattr(rq.ctx, uploadDir(rq.bucket, e.Name), xattrUpload)
		if err != nil {
			continue
		}
		var info uploadInfo
		if json.Unmarshal(b, &info) != nil || !strings.HasPrefix(info.Key, prefix) {
			continue
		}
		if info.Key < keyMarker || (info.Key == keyMarker && (idMarker == "" || e.Name <= idMarker)) {
			continue
		}
		ups = append(ups, up{e.Name, info})
	}
	sort.Slice(ups, func(i, j int) bool {
		if ups[i].info.Key != ups[j].info.Key {
			return ups[i].info.Key < ups[j].info.Key
		}
		return ups[i].id < ups[j].id
	})
	res := listMultipartUploadsResult{Xmlns: s3Namespace, Bucket: rq.bucket, KeyMarker: keyMarker, UploadIDMarker: idMarker,
		Prefix: prefix, Delimiter: delim, MaxUploads: limit}
	lastCP := ""
	count := 0
	for _, u := range ups {
		if delim != "" {
			if i := strings.Index(u.info.Key[len(prefix):], delim); i >= 0 {
				cp := u.info.Key[:len(prefix)+i+len(delim)]
				if cp == lastCP {
					continue
				}
				if count == limit {
					res.IsTruncated = true
					break
				}
				lastCP = cp
				res.CommonPrefixes = append(res.CommonPrefixes, prefixResult{Prefix: cp})
				res.NextKeyMarker, res.NextUploadIDMarker = u.info.Key, u.id
				count++
				continue
			}
		}
		if count == limit {
			res.IsTruncated = true
			break
		}
		res.Uploads = append(res.Uploads, uploadResult{Key: u.info.Key, UploadID: u.id, Initiator: rq.owner(), Owner: rq.owner(),
			StorageClass: "STANDARD", Initiated: s3Time(time.Unix(0, u.info.Initiated))})
		res.NextKeyMarker, res.NextUploadIDMarker = u.info.Key, u.id
		count++
	}
	return writeXML(rq, res)
}
