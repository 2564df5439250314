package s3

import (
	"context"
	"encoding/base64"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Listing walks the bucket's directory tree in key order. Directory
// listings come in name order, but the keys below a directory "d" sort as
// "d/...", after names like "d-x" and "d.x" ('-' and '.' sort before '/'),
// so each directory's subdirectories wait in a small pending list until the
// walk passes their "d/" key. With a delimiter, a directory whose key
// already contains the delimiter after the prefix becomes one common prefix
// without being read; the walk starts at the deepest directory the prefix
// names and skips subtrees that sort entirely before the start key.

// listItem is one entry of a listing page: an object or a common prefix.
type listItem struct {
	key    string
	prefix bool
}

// lister collects one page of a listing.
type lister struct {
	g      *Gateway
	ctx    context.Context
	bucket string
	prefix string
	delim  string
	after  string // list keys and prefixes after this one
	max    int

	items     []listItem
	lastCP    string
	truncated bool
}

// add appends an item; false stops the walk (the page is full).
func (l *lister) add(key string, isPrefix bool) bool {
	if key <= l.after || (isPrefix && key == l.lastCP) {
		return true
	}
	if len(l.items) == l.max {
		l.truncated = true
		return false
	}
	l.items = append(l.items, listItem{key: key, prefix: isPrefix})
	if isPrefix {
		l.lastCP = key
	}
	return true
}

// addKey adds an object key, rolled up to a common prefix if the
// delimiter occurs after the prefix.
func (l *lister) addKey(key string) bool {
	if !strings.HasPrefix(key, l.prefix) {
		return true
	}
	if l.delim != "" {
		if i := strings.Index(key[len(l.prefix):], l.delim); i >= 0 {
			return l.add(key[:len(l.prefix)+i+len(l.delim)], true)
		}
	}
	return l.add(key, false)
}

// dirPath is the directory of a walk key ("" or "a/b/").
func (l *lister) dirPath(dk string) string {
	return "/" + l.bucket + "/" + strings.TrimSuffix(dk, "/")
}

// visitDir lists the subtree of directory key k ("a/b/").
func (l *lister) visitDir(k string) (bool, error) {
	if strings.HasPrefix(k, l.prefix) && l.delim != "" {
		if i := strings.Index(k[len(l.prefix):], l.delim); i >= 0 {
			// Every key below k rolls up into the same common prefix.
			return l.add(k[:len(l.prefix)+i+len(l.delim)], true), nil
		}
	}
	if l.after >= k && !strings.HasPrefix(l.after, k) {
		return true, nil // the whole subtree sorts before the start key
	}
	return l.walk(k)
}

// dirObject adds directory key dk as an object if it is one: empty, or
// created as "dk" by a PUT.
func (l *lister) dirObject(dk string, empty bool) bool {
	if dk == "" || !strings.HasPrefix(dk, l.prefix) || dk <= l.after {
		return true
	}
	if !empty {
		if _, err := l.g.c.GetXattr(l.ctx, l.dirPath(dk), xattrMeta); err != nil {
			return true
		}
	}
	return l.addKey(dk)
}

// startCursor is where the walk of directory key dk starts reading its
// entries: after a cursor below every name that can hold a key after the
// start key, instead of reading (and skipping) the whole directory up to
// it at every page. Within dk, the start key continues with a name comp:
// names below comp hold only smaller keys, except a proper prefix p of
// comp followed in comp by a byte below '/' (p = "a" for comp = "a-b":
// the keys "a/..." sort after "a-b"). So the walk reads the names from
// the shortest such prefix on, or from comp.
func (l *lister) startCursor(dk string) string {
	rest, ok := strings.CutPrefix(l.after, dk)
	if !ok || rest == "" {
		return ""
	}
	comp, _, _ := strings.Cut(rest, "/")
	if comp == "" {
		return ""
	}
	from := comp
	for j := 1; j < len(comp); j++ {
		if comp[j] < '/' {
			from = comp[:j]
			break
		}
	}
	// A listing returns the names after its cursor: this one, a prefix
	// of from, sorts before it (the names between are skipped as before).
	return from[:len(from)-1]
}

// walk lists directory key dk ("" for the bucket) in key order.
func (l *lister) walk(dk string) (bool, error) {
	var pending []string // subdirectory keys waiting for their turn, sorted
	flush := func(upTo string, all bool) (bool, error) {
		for len(pending) > 0 && (all || pending[0] < upTo) {
			d := pending[0]
			pending = pending[1:]
			if ok, err := l.visitDir(d); !ok || err != nil {
				return ok, err
			}
		}
		return true, nil
	}
	first := true
	for e, err := range l.g.c.ReadDirAfter(l.ctx, l.dirPath(dk), l.startCursor(dk)) {
		if err != nil {
			if c := errs.CodeOf(err); c == errs.NotFound || c == errs.NotDir {
				return true, nil // removed meanwhile
			}
			return false, err
		}
		if first {
			first = false
			if !l.dirObject(dk, false) {
				return false, nil
			}
		}
		if dk == "" && e.Name == hiddenDir {
			continue
		}
		isDir, regular := e.Mode.IsDir(), e.Mode.IsRegular()
		if !isDir && !regular {
			continue // symlinks and special files are not objects
		}
		name := dk + e.Name
		if name > l.prefix && !strings.HasPrefix(name, l.prefix) {
			break // names are sorted: no later one has the prefix either
		}
		k := name
		if isDir {
			k += "/"
		}
		if !strings.HasPrefix(k, l.prefix) && !strings.HasPrefix(l.prefix, k) {
			continue
		}
		if ok, err := flush(k, false); !ok || err != nil {
			return ok, err
		}
		if isDir {
			i := sort.SearchStrings(pending, k)
			pending = append(pending, "")
			copy(pending[i+1:], pending[i:])
			pending[i] = k
			continue
		}
		if !l.addKey(k) {
			return false, nil
		}
	}
	if first && !l.dirObject(dk, true) {
		return false, nil
	}
	return flush("", true)
}

// listPage returns up to max items after "after".
func (g *Gateway) listPage(ctx context.Context, bucket, prefix, delim, after string, max int) (*lister, error) {
	l := &lister{g: g, ctx: ctx, bucket: bucket, prefix: prefix, delim: delim, after: after, max: max}
	if max == 0 {
		return l, nil
	}
	start := prefix[:strings.LastIndexByte(prefix, '/')+1]
	if start != "" {
		if _, _, err := objectPath(bucket, start); err != nil {
			return l, nil // no key can have this prefix
		}
	}
	_, err := l.walk(start)
	return l, err
}

// listObjects is ListObjects (version 1) and ListObjectsV2 (version 2).
func (g *Gateway) listObjects(rq *request, version int) error {
	q := rq.query
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
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
	res := listObjectsResult{Xmlns: s3Namespace, Name: rq.bucket, MaxKeys: maxKeys, Delimiter: delim, EncodingType: enc}
	var after string
	if version == 2 {
		res.StartAfter = q.Get("start-after")
		after = res.StartAfter
		// An empty token is no token (SDKs send ContinuationToken="").
		if tok := q.Get("continuation-token"); tok != "" {
			b, err := base64.RawURLEncoding.DecodeString(tok)
			if err != nil {
				return apiErr(ErrInvalidArgument, "The continuation token provided is incorrect")
			}
			after, res.ContToken = string(b), tok
		}
	} else {
		m := q.Get("marker")
		after, res.Marker = m, &m
	}
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	l, err := g.listPage(rq.ctx, rq.bucket, prefix, delim, after, maxKeys)
	if err != nil {
		return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
	}
	fetchOwner := version == 1 || q.Get("fetch-owner") == "true"
	contents, err := g.describe(rq, l.items, fetchOwner)
	if err != nil {
		return err
	}
	encode := func(s string) string {
		if enc == "url" {
			return listEncode(s)
		}
		return s
	}
	res.Prefix = prefix
	if version == 2 {
		// V1 returns Prefix as given even with encoding-type=url, as S3
		// does (boto3 asks for url encoding in every V1 listing and
		// decodes every element but Prefix).
		res.Prefix = encode(prefix)
	}
	res.Delimiter = encode(delim)
	res.StartAfter = encode(res.StartAfter)
	if res.Marker != nil {
		m := encode(*res.Marker)
		res.Marker = &m
	}
	for i := range contents {
		contents[i].Key = encode(contents[i].Key)
	}
	res.Contents = contents
	for _, it := range l.items {
		if it.prefix {
			res.CommonPrefixes = append(res.CommonPrefixes, prefixResult{Prefix: encode(it.key)})
		}
	}
	res.IsTruncated = l.truncated
	if l.truncated && len(l.items) > 0 {
		last := l.items[len(l.items)-1].key
		if version == 2 {
			res.NextContToken = base64.RawURLEncoding.EncodeToString([]byte(last))
		} else {
			res.NextMarker = encode(last)
		}
	}
	if version == 2 {
		n := len(res.Contents) + len(res.CommonPrefixes)
		res.KeyCount = &n
	}
	return writeXML(rq, res)
}

// listEncode is encoding-type=url: every byte but the unreserved ones and
// '/' as %XY, so a space is %20 and '+' is %2B. Decoders that read '+' as a
// space and those that do not agree on it.
func listEncode(s string) string { return awsURIEncode(s, true) }

// describe returns the objects of a page, in page order. The objects of
// one directory come from listings of it with attributes and the
// gateway's metadata (one request per page of up to 1,024 entries instead
// of a stat and a getxattr per object); those the listings did not find
// (removed meanwhile, or a "dir/" object), and every object where the
// metadata service sends no metadata with its listings (one older than
// this gateway), are looked up one by one as before. Up to 16 directories
// or lookups at a time. Objects removed since the walk are left out.
func (g *Gateway) describe(rq *request, items []listItem, withOwner bool) ([]objectResult, error) {
	out := make([]*objectResult, len(items))
	errsOut := make([]error, len(items))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var bown owner
	if withOwner {
		bown = ownerOr(g.bucketOwner(rq.ctx, rq.bucket), rq.owner())
	}
	result := func(i int, info *objInfo) {
		it := items[i]
		r := &objectResult{Key: it.key, LastModified: s3Time(info.attr.Mtime), ETag: `"` + info.etag + `"`, Size: info.attr.Size, StorageClass: info.meta.storageClass(info.attr)}
		if withOwner {
			o := ownerOr(info.meta.Owner, bown)
			r.Owner = &o
		}
		out[i] = r
	}
	stat := func(i int) {
		info, _, err := g.statObjectIn(rq.ctx, rq.bucket, items[i].key)
		if err != nil {
			if ae, ok := err.(*APIError); ok && ae.Code == ErrNoSuchKey.Code {
				return
			}
			errsOut[i] = err
			return
		}
		result(i, info)
	}
	// The file objects by directory: name -> item index.
	dirs := map[string]map[string]int{}
	for i, it := range items {
		if it.prefix {
			continue
		}
		p, isDir, err := objectPath(rq.bucket, it.key)
		if err != nil || isDir {
			sem <- struct{}{}
			wg.Go(func() { defer func() { <-sem }(); stat(i) })
			continue
		}
		d := parentDir(p)
		if dirs[d] == nil {
			dirs[d] = map[string]int{}
		}
		dirs[d][p[len(d)+1:]] = i
	}
	for d, want := range dirs {
		sem <- struct{}{}
		wg.Go(func() {
			found := g.listObjectInfos(rq.ctx, d, want)
			<-sem // before the lookups take slots of their own
			for name, i := range want {
				if info, ok := found[name]; ok {
					result(i, info)
					continue
				}
				sem <- struct{}{}
				wg.Go(func() { defer func() { <-sem }(); stat(i) })
			}
		})
	}
	wg.Wait()
	var res []objectResult
	for i := range items {
		if errsOut[i] != nil {
			return nil, errsOut[i]
		}
		if out[i] != nil {
			res = append(res, *out[i])
		}
	}
	return res, nil
}

// listObjectInfos returns the objects of the regular files named in want
// (names in directory d), from listings of d that carry each entry's
// attributes and metadata xattr (client.ReadDirNamed). Names it does not
// return are looked up by the caller: it returns what it found so far on
// any failure, and nothing if the metadata service sends no xattrs with
// its listings.
func (g *Gateway) listObjectInfos(ctx context.Context, d string, want map[string]int) map[string]*objInfo {
	first, last := "", ""
	for name := range want {
		if first == "" || name < first {
			first = name
		}
		last = max(last, name)
	}
	fi, err := g.c.Lstat(ctx, d)
	if err != nil || !fi.IsDir() {
		return nil
	}
	isWanted := func(name string) bool { _, ok := want[name]; return ok }
	entries, _ := g.c.ReadDirNamed(ctx, fi.Attr().Ino, first, last, len(want), isWanted, min(max(2*len(want), 64), 1024), xattrMeta)
	found := make(map[string]*objInfo, len(entries))
	for name, e := range entries {
		if e.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue // not a file: the lookup says what it is
		}
		info := &objInfo{path: d + "/" + name, attr: attrOfInode(*e.Attr)}
		var stored *objectMeta
		if e.HasXattr {
			stored, _ = decodeMeta(e.Xattr)
		}
		info.setFileMeta(stored)
		found[name] = info
	}
	return found
}
