package s3

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"maps"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sluice-fs/sluice/client"
)

// Extended attributes the gateway keeps on files and directories
// (docs/s3.md, "Metadata"). Values are JSON.
const (
	// xattrMeta on a file: the object's ETag, its standard headers and
	// user metadata, and the size and mtime they were recorded for. On a
	// directory: marks the directory as an explicit "dir/" object.
	xattrMeta = "user.s3.meta"
	// xattrUpload on a multipart upload's directory: the upload's key
	// and the metadata the object will get.
	xattrUpload = "user.s3.upload"
	// xattrACL on a bucket directory: its canned ACL (public-read,
	// public-read-write, authenticated-read; absent: private), plain text.
	xattrACL = "user.s3.acl"
	// xattrParts on a multipart object: its part sizes (parts.go).
	xattrParts = "user.s3.parts"
	// xattrOwner on a bucket directory: the access key that created it.
	xattrOwner = "user.s3.owner"
)

// storedHeaders are the standard headers stored with an object and
// returned on GET and HEAD, besides Content-Type.
var storedHeaders = []string{"Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language", "Expires", "X-Amz-Website-Redirect-Location"}

// maxUserMeta is S3's limit on the size of user metadata (names and values).
const maxUserMeta = 2 << 10

// objectMeta is what the gateway records about an object beside its data.
type objectMeta struct {
	ETag        string            `json:"etag"`              // hex, without quotes; "<hex>-N" for multipart
	Size        int64             `json:"size"`              // the size the ETag is for
	Mtime       int64             `json:"mtime"`             // the mtime (ns) the ETag is for
	ContentType string            `json:"type,omitempty"`    // Content-Type
	Headers     map[string]string `json:"headers,omitempty"` // storedHeaders
	User        map[string]string `json:"user,omitempty"`    // x-amz-meta-NAME (lowercase NAME)
	Checksum    map[string]string `json:"checksum,omitempty"`
	Parts       int               `json:"parts,omitempty"`  // number of parts of a multipart object
	ACL         string            `json:"acl,omitempty"`    // canned ACL; "" is private
	Owner       string            `json:"owner,omitempty"`  // access key that wrote the object ("anonymous")
	UploadID    string            `json:"upload,omitempty"` // the multipart upload that made the object
	// VersionID is the object's version ("" is the null version);
	// DeleteMarker marks a delete marker in a key's versions (versions.go).
	VersionID    string `json:"vid,omitempty"`
	DeleteMarker bool   `json:"dm,omitempty"`
	// Tags are the object's tags (tagging.go).
	Tags map[string]string `json:"tags,omitempty"`
	// StorageClass is the class of the lifecycle transition that moved
	// the object to the object tier ("": STANDARD; transition.go).
	StorageClass string `json:"class,omitempty"`
}

func (m *objectMeta) encode() []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic("s3: objectMeta does not marshal: " + err.Error()) // only strings and numbers
	}
	return b
}

// decodeMeta decodes stored metadata. It returns a copy of its own: the
// caller may change it.
func decodeMeta(b []byte) (*objectMeta, bool) {
	if m, ok := decodedMetas.get(b); ok {
		return m, true
	}
	var m objectMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, false
	}
	decodedMetas.put(b, &m)
	return m.clone(), true
}

// clone copies m and its maps.
func (m *objectMeta) clone() *objectMeta {
	c := *m
	c.Headers = maps.Clone(m.Headers)
	c.User = maps.Clone(m.User)
	c.Checksum = maps.Clone(m.Checksum)
	c.Tags = maps.Clone(m.Tags)
	return &c
}

// metaCache holds metadata decoded recently, by its stored bytes: GETs
// and listings decode the same few hundred bytes of JSON again and again
// (decoding was 4% of the gateway's CPU in a benchmark of small GETs, and
// part of a listing's cost per key). The bytes are the whole key, so an
// entry is never stale. It holds at most metaCacheMax entries and starts
// over when full.
type metaCache struct {
	mu sync.Mutex
	m  map[string]*objectMeta // never changed once in the map
}

const metaCacheMax = 8192

var decodedMetas = metaCache{m: make(map[string]*objectMeta)}

func (c *metaCache) get(b []byte) (*objectMeta, bool) {
	c.mu.Lock()
	m, ok := c.m[string(b)]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	return m.clone(), true
}

func (c *metaCache) put(b []byte, m *objectMeta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= metaCacheMax {
		clear(c.m)
	}
	c.m[string(b)] = m
}

// validFor reports whether the recorded ETag still describes a file with
// these attributes: a write through POSIX changes the mtime or size.
func (m *objectMeta) validFor(a *client.Attr) bool {
	return m.Size == a.Size && m.Mtime == a.Mtime.UnixNano()
}

// storageClass is the class to report for the object of attributes a:
// the recorded transition class while the metadata still describes the
// file (a change through POSIX brings its data back to the targets),
// else STANDARD.
func (m *objectMeta) storageClass(a *client.Attr) string {
	if c := m.transitionClass(a); c != "" {
		return c
	}
	return "STANDARD"
}

// transitionClass is storageClass, "" for STANDARD.
func (m *objectMeta) transitionClass(a *client.Attr) string {
	if m.validFor(a) {
		return m.StorageClass
	}
	return ""
}

// syntheticETag is the ETag of a file the gateway did not write (or that
// was changed through POSIX since): derived from the inode, size and mtime,
// so it changes when the file does. It ends in "-1" so that clients do not
// mistake it for the MD5 of the data.
func syntheticETag(a *client.Attr) string {
	var b [24]byte
	binary.BigEndian.PutUint64(b[0:], a.Ino)
	binary.BigEndian.PutUint64(b[8:], uint64(a.Size))
	binary.BigEndian.PutUint64(b[16:], uint64(a.Mtime.UnixNano()))
	s := sha256.Sum256(b[:])
	return hex.EncodeToString(s[:16]) + "-1"
}

// emptyETag is the MD5 of no bytes, the ETag of a directory object.
const emptyETag = "d41d8cd98f00b204e9800998ecf8427e"

// metaFromRequest collects the metadata a PUT, a CopyObject with the
// REPLACE directive or a CreateMultipartUpload stores.
func metaFromRequest(h http.Header) (*objectMeta, error) {
	m := &objectMeta{ContentType: h.Get("Content-Type")}
	for _, name := range storedHeaders {
		v := strings.Join(h.Values(name), ", ") // several lines are one list
		if name == "Content-Encoding" {
			v = stripAWSChunked(v)
		}
		if v != "" {
			if m.Headers == nil {
				m.Headers = make(map[string]string)
			}
			m.Headers[name] = v
		}
	}
	size := 0
	for name, vals := range h {
		lname := strings.ToLower(name)
		if !strings.HasPrefix(lname, "x-amz-meta-") {
			continue
		}
		n := lname[len("x-amz-meta-"):]
		v := metaValueIn(strings.Join(vals, ","))
		size += len(n) + len(v)
		if m.User == nil {
			m.User = make(map[string]string)
		}
		m.User[n] = v
	}
	if size > maxUserMeta {
		return nil, apiErr(ErrMetadataTooLarge, "Your metadata headers are %d bytes; the limit is %d", size, maxUserMeta)
	}
	return m, nil
}

// stripAWSChunked removes aws-chunked from a Content-Encoding list: it is
// how the body was sent, not how the object is encoded. The other
// elements keep their spelling and the spaces between them.
func stripAWSChunked(v string) string {
	var keep []string
	for e := range strings.SplitSeq(v, ",") {
		if t := strings.TrimSpace(e); t != "" && !strings.EqualFold(t, "aws-chunked") {
			keep = append(keep, e)
		}
	}
	return strings.TrimSpace(strings.Join(keep, ","))
}

// metaValueIn is how a user metadata value is stored: as UTF-8. Header
// bytes that are not UTF-8 are read as ISO-8859-1, HTTP's historical
// charset (what Python's http.client sends), rather than garbled.
func metaValueIn(v string) string {
	if utf8.ValidString(v) {
		return v
	}
	r := make([]rune, len(v))
	for i := 0; i < len(v); i++ {
		r[i] = rune(v[i])
	}
	return string(r)
}

// metaValueOut is how a stored user metadata value is returned: as it is
// if ASCII, else RFC 2047 encoded (=?UTF-8?B?...?=), as S3 returns
// non-ASCII metadata.
func metaValueOut(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] >= utf8.RuneSelf {
			return mime.BEncoding.Encode("UTF-8", v)
		}
	}
	return v
}

// setHeaders writes the stored metadata to a GET or HEAD response.
func (m *objectMeta) setHeaders(h http.Header) {
	ct := m.ContentType
	if ct == "" {
		ct = "binary/octet-stream"
	}
	h.Set("Content-Type", ct)
	for name, v := range m.Headers {
		h.Set(name, v)
	}
	names := make([]string, 0, len(m.User))
	for n := range m.User {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h["X-Amz-Meta-"+n] = []string{metaValueOut(m.User[n])}
	}
}

// setACL records the canned ACL and the owner of a new object.
func (m *objectMeta) setACL(acl cannedACL, owner string) {
	m.ACL, m.Owner = string(acl), owner
	if acl.normal() == aclPrivate {
		m.ACL = ""
	}
}

// copyMeta is the metadata of a copy: the source's, without its ETag, the
// attributes the ETag was recorded for, its ACL and owner (a copy gets
// the ACL of the copy request, as in S3).
func (m *objectMeta) copyMeta() *objectMeta {
	return &objectMeta{ContentType: m.ContentType, Headers: m.Headers, User: m.User}
}
