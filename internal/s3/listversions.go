package s3

import (
	"context"
	"encoding/xml"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-fs/sluice/internal/errs"
)

// ListObjectVersions merges two walks in key order: the namespace (the
// current objects, as ListObjects lists them) and the versions tree
// (versions.go: keys with noncurrent versions or delete markers). Each walk
// yields at most a page of keys and common prefixes after the key marker;
// the merge goes no further than the last key of a walk that was cut
// short, so no key between is missed, and every key yields at least one
// row. Then each key's versions are listed newest first: the current
// object, then the version directory in name order.

// versionRow is one row of ListObjectVersions: a version, a delete marker
// or a common prefix.
type versionRow struct {
	key    string
	vid    string // "null" for the null version; "" for a prefix
	prefix bool
	latest bool
	marker bool
	info   *objInfo // nil for a prefix
}

// orderVersions returns a key's versions newest first, from the current
// object (nil if none) and the noncurrent versions newest first. A
// noncurrent version with the current one's ID is the same version (a
// crash between the link and the exchange left both names) and is left
// out. Without a current object, a delete marker at the head is the latest
// version; an object at the head (its current file was removed through
// POSIX) is not.
func orderVersions(cur *versionRow, noncurrent []versionRow) []versionRow {
	out := make([]versionRow, 0, len(noncurrent)+1)
	if cur != nil {
		c := *cur
		c.latest = true
		out = append(out, c)
	}
	for i, r := range noncurrent {
		if cur != nil && r.vid == cur.vid {
			continue
		}
		r.latest = cur == nil && i == 0 && r.marker
		out = append(out, r)
	}
	return out
}

// afterVersion returns the rows after the one of version vid (none if
// vid is not there: the listing goes on with the next key).
func afterVersion(rows []versionRow, vid string) []versionRow {
	for i, r := range rows {
		if r.vid == vid {
			return rows[i+1:]
		}
	}
	return nil
}

// mergeItems merges two sorted pages of keys and common prefixes into one
// sorted list without duplicates. A page that was cut short (truncated)
// bounds the result at its last item: keys after it may be missing from
// it. cut reports whether the result is incomplete.
func mergeItems(a []listItem, aTrunc bool, b []listItem, bTrunc bool) (items []listItem, cut bool) {
	bound, bounded := "", false
	for _, p := range []struct {
		items []listItem
		trunc bool
	}{{a, aTrunc}, {b, bTrunc}} {
		if p.trunc && len(p.items) > 0 {
			if last := p.items[len(p.items)-1].key; !bounded || last < bound {
				bound, bounded = last, true
			}
		}
	}
	cut = aTrunc || bTrunc
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var it listItem
		switch {
		case j == len(b) || i < len(a) && a[i].key < b[j].key:
			it = a[i]
			i++
		case i == len(a) || b[j].key < a[i].key:
			it = b[j]
			j++
		default: // the same key in both
			it = a[i]
			it.prefix = a[i].prefix || b[j].prefix
			i, j = i+1, j+1
		}
		if bounded && it.key > bound {
			break
		}
		items = append(items, it)
	}
	return items, cut
}

// versionPage collects the rows of one page.
type versionPage struct {
	max       int
	rows      []versionRow
	truncated bool
}

// add appends a row; false when the page is full (it is then truncated).
func (p *versionPage) add(r versionRow) bool {
	if len(p.rows) >= p.max {
		p.truncated = true
		return false
	}
	p.rows = append(p.rows, r)
	return true
}

// versionKeys walks the versions tree of a bucket in key order: up to max
// keys with noncurrent versions, or common prefixes, after "after".
func (g *Gateway) versionKeys(ctx context.Context, bucket, prefix, delim, after string, max int) (*lister, error) {
	l := &lister{g: g, ctx: ctx, bucket: bucket, prefix: prefix, delim: delim, after: after, max: max}
	if max == 0 {
		return l, nil
	}
	start := prefix[:strings.LastIndexByte(prefix, '/')+1]
	dir := versionsRoot(bucket)
	if start != "" {
		if _, _, err := objectPath(bucket, start); err != nil {
			return l, nil // no key can have this prefix
		}
		for c := range strings.SplitSeq(strings.TrimSuffix(start, "/"), "/") {
			dir += "/k" + c
		}
	}
	_, err := l.walkVersions(dir, start)
	return l, err
}

// versionChild is a subdirectory of the versions tree: the versions of
// one key and the keys below it.
type versionChild struct {
	path    string
	read    bool
	files   bool // has version files: the key has versions
	subdirs bool // has subdirectories: keys below it have versions
}

func (l *lister) readVersionChild(c *versionChild) error {
	if c.read {
		return nil
	}
	c.read = true
	for e, err := range l.g.c.ReadDir(l.ctx, c.path) {
		if err != nil {
			if code := errs.CodeOf(err); code == errs.NotFound || code == errs.NotDir {
				return nil
			}
			return err
		}
		switch {
		case e.Mode.IsDir() && strings.HasPrefix(e.Name, "k"):
			c.subdirs = true
		case e.Mode.IsRegular():
			if _, ok := parseVersionFileName(e.Name); ok {
				c.files = true
			}
		}
		if c.files && c.subdirs {
			break
		}
	}
	return nil
}

// walkVersions lists the versions tree below dir, whose keys start with
// dk ("" or "a/b/"), in key order: the key dk+c of a child "k"+c comes
// when its name does, the keys below it ("dk+c/...") when "dk+c/" does.
func (l *lister) walkVersions(dir, dk string) (bool, error) {
	entries, err := l.g.c.ReadDirAll(l.ctx, dir)
	if err != nil {
		if c := errs.CodeOf(err); c == errs.NotFound || c == errs.NotDir {
			return true, nil
		}
		return false, err
	}
	type item struct {
		key   string
		sub   bool
		child *versionChild
	}
	var items []item
	for _, e := range entries {
		c, ok := strings.CutPrefix(e.Name, "k")
		if !ok || !e.Mode.IsDir() {
			continue
		}
		ch := &versionChild{path: dir + "/" + e.Name}
		items = append(items, item{key: dk + c, child: ch}, item{key: dk + c + "/", sub: true, child: ch})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
	for _, it := range items {
		k := it.key
		if !strings.HasPrefix(k, l.prefix) && !(it.sub && strings.HasPrefix(l.prefix, k)) {
			continue
		}
		if !it.sub {
			if k <= l.after {
				continue
			}
			if err := l.readVersionChild(it.child); err != nil {
				return false, err
			}
			if it.child.files && !l.addKey(k) {
				return false, nil
			}
			continue
		}
		if strings.HasPrefix(k, l.prefix) && l.delim != "" {
			if i := strings.Index(k[len(l.prefix):], l.delim); i >= 0 {
				// Every key below k rolls up into one common prefix.
				if err := l.readVersionChild(it.child); err != nil {
					return false, err
				}
				if it.child.subdirs && !l.add(k[:len(l.prefix)+i+len(l.delim)], true) {
					return false, nil
				}
				continue
			}
		}
		if l.after >= k && !strings.HasPrefix(l.after, k) {
			continue // the whole subtree sorts before the start key
		}
		if err := l.readVersionChild(it.child); err != nil {
			return false, err
		}
		if !it.child.subdirs {
			continue
		}
		if ok, err := l.walkVersions(it.child.path, k); !ok || err != nil {
			return ok, err
		}
	}
	return true, nil
}

// keyVersions returns the versions of a key, newest first.
func (g *Gateway) keyVersions(ctx context.Context, bucket, key string) ([]versionRow, error) {
	var cur *versionRow
	info, _, err := g.statObjectIn(ctx, bucket, key)
	switch {
	case err == nil:
		cur = &versionRow{key: key, vid: versionName(info.meta.VersionID), info: info}
	case hasCode(err, ErrNoSuchKey.Code):
	default:
		return nil, err
	}
	files, err := g.versionFiles(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	var nc []versionRow
	for _, f := range files {
		vi, err := g.statVersionFile(ctx, f.path, f.vid)
		if err != nil {
			if isNotExist(err) {
				continue // deleted meanwhile
			}
			return nil, fsErr(err, ErrInternal, "version "+f.vid+" of key "+key)
		}
		nc = append(nc, versionRow{key: key, vid: f.vid, marker: vi.meta.DeleteMarker, info: vi})
	}
	return orderVersions(cur, nc), nil
}

// listObjectVersions is ListObjectVersions. In a bucket that never had
// versioning it lists the current objects, each the null version.
func (g *Gateway) listObjectVersions(rq *request) error {
	q := rq.query
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	keyMarker, vidMarker := q.Get("key-marker"), q.Get("version-id-marker")
	enc := q.Get("encoding-type")
	if enc != "" && enc != "url" {
		return apiErr(ErrInvalidArgument, "Invalid Encoding Method specified in Request")
	}
	maxKeys := 1000
	if v := q.Get("max-keys"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apiErr(ErrInvalidArgument, "Provided max-keys not an integer or within integer range")
		}
		maxKeys = min(n, 1000)
	}
	if vidMarker != "" {
		if keyMarker == "" {
			return apiErr(ErrInvalidArgument, "A version-id marker cannot be specified without a key marker.")
		}
		if !validVersionID(vidMarker) {
			return apiErr(ErrInvalidArgument, "Invalid version id specified")
		}
	}
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	page := &versionPage{max: maxKeys}
	var lastItem string
	full := false
	if vidMarker != "" && strings.HasPrefix(keyMarker, prefix) && maxKeys > 0 {
		if _, _, err := objectPath(rq.bucket, keyMarker); err == nil {
			rows, err := g.keyVersions(rq.ctx, rq.bucket, keyMarker)
			if err != nil {
				return err
			}
			for _, r := range afterVersion(rows, vidMarker) {
				if !page.add(r) {
					full = true
					break
				}
			}
		}
	}
	cut := false
	if !full && maxKeys > 0 {
		ns, err := g.listPage(rq.ctx, rq.bucket, prefix, delim, keyMarker, maxKeys)
		if err != nil {
			return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
		}
		vs, err := g.versionKeys(rq.ctx, rq.bucket, prefix, delim, keyMarker, maxKeys)
		if err != nil {
			return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
		}
		var items []listItem
		items, cut = mergeItems(ns.items, ns.truncated, vs.items, vs.truncated)
	items:
		for _, it := range items {
			if it.prefix {
				if !page.add(versionRow{key: it.key, prefix: true}) {
					break
				}
				lastItem = it.key
				continue
			}
			rows, err := g.keyVersions(rq.ctx, rq.bucket, it.key)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if !page.add(r) {
					break items
				}
			}
			lastItem = it.key
		}
	}
	res, err := g.versionsResult(rq, page, enc)
	if err != nil {
		return err
	}
	res.Prefix, res.KeyMarker, res.VersionIDMarker, res.MaxKeys, res.Delimiter = res.encode(prefix), res.encode(keyMarker), vidMarker, maxKeys, res.encode(delim)
	switch {
	case page.truncated && len(page.rows) > 0:
		last := page.rows[len(page.rows)-1]
		res.IsTruncated, res.NextKeyMarker, res.NextVersionIDMarker = true, res.encode(last.key), last.vid
	case cut && lastItem != "":
		// The walks stopped: go on after every version of the last key.
		res.IsTruncated, res.NextKeyMarker = true, res.encode(lastItem)
		if n := len(page.rows); n > 0 && page.rows[n-1].key == lastItem {
			res.NextVersionIDMarker = page.rows[n-1].vid
		}
	}
	return writeXML(rq, res)
}

// versionsResult turns a page's rows into the response document.
func (g *Gateway) versionsResult(rq *request, page *versionPage, enc string) (*listVersionsResult, error) {
	res := &listVersionsResult{Xmlns: s3Namespace, Name: rq.bucket, EncodingType: enc}
	bown := ownerOr(g.bucketOwner(rq.ctx, rq.bucket), rq.owner())
	for _, r := range page.rows {
		if r.prefix {
			res.CommonPrefixes = append(res.CommonPrefixes, prefixResult{Prefix: res.encode(r.key)})
			continue
		}
		o := ownerOr(r.info.meta.Owner, bown)
		e := versionEntry{Key: res.encode(r.key), VersionID: r.vid, IsLatest: r.latest, LastModified: s3Time(r.info.attr.Mtime), Owner: &o}
		if r.marker {
			e.XMLName = xml.Name{Local: "DeleteMarker"}
		} else {
			size := r.info.attr.Size
			e.XMLName = xml.Name{Local: "Version"}
			e.ETag, e.Size, e.StorageClass = `"`+r.info.etag+`"`, &size, r.info.meta.storageClass(r.info.attr)
		}
		res.Entries = append(res.Entries, e)
	}
	return res, nil
}

// encode applies the listing's encoding-type.
func (r *listVersionsResult) encode(s string) string {
	if r.EncodingType == "url" {
		return listEncode(s)
	}
	return s
}
