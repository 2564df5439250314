package s3

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Tags (docs/s3.md, "Tagging"): an object's tags are part of its recorded
// metadata (user.s3.meta), so they stay with its version; a bucket's tags
// are the xattr user.s3.tagging of its directory (JSON). The limits are
// S3's.

const (
	// xattrBucketTagging on a bucket directory: its tag set, JSON.
	xattrBucketTagging = "user.s3.tagging"

	maxObjectTags  = 10
	maxBucketTags  = 50
	maxTagKeyLen   = 128 // Unicode characters
	maxTagValueLen = 256
)

var (
	ErrInvalidTag   = &APIError{Code: "InvalidTag", Status: http.StatusBadRequest, Message: "The TagKey or TagValue you have provided is invalid."}
	ErrNoSuchTagSet = &APIError{Code: "NoSuchTagSet", Status: http.StatusNotFound, Message: "The TagSet does not exist"}
)

// tagChar reports whether r may appear in a tag key or value: letters,
// digits, white space and _ . : / = + - @, as S3 allows.
func tagChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsSpace(r) || strings.ContainsRune("_.:/=+-@", r)
}

// checkTags validates a tag set of at most limit tags (10 for objects, 50
// for buckets), given as (key, value) pairs in request order.
func checkTags(pairs [][2]string, limit int, forBucket bool) (map[string]string, error) {
	what := "Object"
	if forBucket {
		what = "Bucket"
	}
	if len(pairs) > limit {
		return nil, apiErr(ErrInvalidTag, "%s tags cannot be greater than %d", what, limit)
	}
	tags := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v := p[0], p[1]
		switch {
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return nil, apiErr(ErrInvalidTag, "The TagKey or TagValue you have provided is not valid UTF-8.")
		case k == "" || utf8.RuneCountInString(k) > maxTagKeyLen:
			return nil, apiErr(ErrInvalidTag, "The TagKey you have provided is invalid: it must have 1 to %d characters", maxTagKeyLen)
		case utf8.RuneCountInString(v) > maxTagValueLen:
			return nil, apiErr(ErrInvalidTag, "The TagValue you have provided is too long: at most %d characters", maxTagValueLen)
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return nil, apiErr(ErrInvalidTag, "Your TagKey cannot be prefixed with aws:")
		case strings.IndexFunc(k, func(r rune) bool { return !tagChar(r) }) >= 0:
			return nil, apiErr(ErrInvalidTag, "The TagKey you have provided is invalid: %q has a character tags cannot hold", k)
		case strings.IndexFunc(v, func(r rune) bool { return !tagChar(r) }) >= 0:
			return nil, apiErr(ErrInvalidTag, "The TagValue you have provided is invalid: %q has a character tags cannot hold", v)
		}
		if _, dup := tags[k]; dup {
			return nil, apiErr(ErrInvalidTag, "Cannot provide multiple Tags with the same key")
		}
		tags[k] = v
	}
	if len(tags) == 0 {
		return nil, nil
	}
	return tags, nil
}

// parseTaggingHeader parses x-amz-tagging (PutObject, CopyObject,
// CreateMultipartUpload): URL query encoding, "k1=v1&k2=v2".
func parseTaggingHeader(v string) (map[string]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var pairs [][2]string
	for part := range strings.SplitSeq(v, "&") {
		if part == "" {
			continue
		}
		rk, rv, _ := strings.Cut(part, "=")
		k, err1 := url.QueryUnescape(rk)
		val, err2 := url.QueryUnescape(rv)
		if err1 != nil || err2 != nil {
			return nil, apiErr(ErrInvalidArgument, "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.")
		}
		pairs = append(pairs, [2]string{k, val})
	}
	return checkTags(pairs, maxObjectTags, false)
}

// tagSetOf returns the TagSet document of tags, sorted by key.
func tagSetOf(tags map[string]string) tagging {
	out := tagging{Xmlns: s3Namespace}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.TagSet.Tags = append(out.TagSet.Tags, tagXML{Key: k, Value: tags[k]})
	}
	return out
}

// readTagging reads a Tagging document of at most limit tags.
func (g *Gateway) readTagging(rq *request, limit int, forBucket bool) (map[string]string, error) {
	body, err := g.readDocument(rq, true)
	if err != nil {
		return nil, err
	}
	var doc tagging
	if _, err := decodeXML(body, &doc, false); err != nil {
		return nil, err
	}
	pairs := make([][2]string, len(doc.TagSet.Tags))
	for i, t := range doc.TagSet.Tags {
		pairs[i] = [2]string{t.Key, t.Value}
	}
	return checkTags(pairs, limit, forBucket)
}

// taggingTarget is the object (or version) an object tagging request is
// about.
func (g *Gateway) taggingTarget(rq *request) (*objInfo, error) {
	info, err := g.readTarget(rq)
	if err != nil {
		return nil, err
	}
	if info.dir {
		return nil, apiErr(ErrNotImplemented, "Directory objects (keys ending in '/') cannot have tags in Sluice")
	}
	return info, nil
}

func (g *Gateway) getObjectTagging(rq *request) error {
	info, err := g.taggingTarget(rq)
	if err != nil {
		return err
	}
	return writeXML(rq, tagSetOf(info.meta.Tags))
}

// putObjectTagging replaces an object's tags (PutObjectTagging) or removes
// them (DeleteObjectTagging, tags nil), in its recorded metadata.
func (g *Gateway) putObjectTagging(rq *request, del bool) error {
	var tags map[string]string
	if !del {
		var err error
		if tags, err = g.readTagging(rq, maxObjectTags, false); err != nil {
			return err
		}
	}
	info, err := g.taggingTarget(rq)
	if err != nil {
		return err
	}
	if err := g.updateMeta(rq, info, func(m *objectMeta) { m.Tags = tags }); err != nil {
		return err
	}
	if del {
		rq.w.WriteHeader(http.StatusNoContent)
		return nil
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// updateMeta changes the recorded metadata of the file of an object or a
// version, leaving the rest (ETag, headers) as it is.
func (g *Gateway) updateMeta(rq *request, info *objInfo, change func(*objectMeta)) error {
	m := &objectMeta{}
	raw, err := g.c.GetXattr(rq.ctx, info.path, xattrMeta)
	switch {
	case err == nil:
		if stored, ok := decodeMeta(raw); ok {
			m = stored
		}
	case errs.CodeOf(err) != errs.NoData:
		return fsErr(err, ErrNoSuchKey, "key "+rq.key)
	}
	change(m)
	if err := g.c.SetXattr(rq.ctx, info.path, xattrMeta, m.encode()); err != nil {
		return fsErr(err, ErrNoSuchKey, "key "+rq.key)
	}
	return nil
}

// setTaggingCount sets x-amz-tagging-count on a GET or HEAD response.
func setTaggingCount(h http.Header, tags map[string]string) {
	if len(tags) > 0 {
		h.Set("X-Amz-Tagging-Count", strconv.Itoa(len(tags)))
	}
}

func (g *Gateway) getBucketTagging(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	v, err := g.bucketAttr(rq.ctx, rq.bucket, xattrBucketTagging)
	if err != nil {
		return err
	}
	var tags map[string]string
	if v != nil {
		if err := json.Unmarshal(v, &tags); err != nil {
			return wrapErr(ErrInternal, errs.New(errs.Corruption, "s3: bucket %s has unreadable tags: %v", rq.bucket, err), "%s", ErrInternal.Message)
		}
	}
	if len(tags) == 0 {
		return apiErr(ErrNoSuchTagSet, "The TagSet does not exist")
	}
	return writeXML(rq, tagSetOf(tags))
}

// putBucketTagging sets (or, del, removes) a bucket's tags.
func (g *Gateway) putBucketTagging(rq *request, del bool) error {
	var val []byte
	if !del {
		tags, err := g.readTagging(rq, maxBucketTags, true)
		if err != nil {
			return err
		}
		if len(tags) > 0 {
			val, _ = json.Marshal(tags)
		}
	}
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	if err := g.setBucketAttr(rq.ctx, rq.bucket, xattrBucketTagging, val); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent) // also for PutBucketTagging, as S3
	return nil
}
