package s3

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Access control (docs/s3.md, "Access control").
//
// Every access key has full access to every bucket: a signed request is
// always allowed. ACLs decide what anonymous (unsigned) requests may do,
// as in S3: a bucket's ACL governs listing it and writing objects into it;
// an object's ACL, and only it, governs reading the object. Only the canned
// ACLs are kept (a name, not a grant list); a grant list that is not one
// of them is refused with NotImplemented rather than stored partly.
//
// The decision is pure: requestOp classifies a request and
// anonymousAllowed decides from the op and one canned ACL. The handlers
// only fetch the ACL the op needs (the bucket's in serve, the object's in
// getObject, from the metadata statObject reads anyway).

// cannedACL is an S3 canned ACL. The empty string means private.
type cannedACL string

const (
	aclPrivate           cannedACL = "private"
	aclPublicRead        cannedACL = "public-read"
	aclPublicReadWrite   cannedACL = "public-read-write"
	aclAuthenticatedRead cannedACL = "authenticated-read"
	aclBucketOwnerRead   cannedACL = "bucket-owner-read"
	aclBucketOwnerFull   cannedACL = "bucket-owner-full-control"
)

// bucketACLs and objectACLs are the canned ACLs the gateway keeps, in the
// order aclFromPolicy tries them.
var (
	bucketACLs = []cannedACL{aclPrivate, aclPublicRead, aclPublicReadWrite, aclAuthenticatedRead}
	objectACLs = []cannedACL{aclPrivate, aclPublicRead, aclPublicReadWrite, aclAuthenticatedRead, aclBucketOwnerRead, aclBucketOwnerFull}
)

// Grantee group URIs and permissions of the S3 ACL model.
const (
	groupAllUsers      = "http://acs.amazonaws.com/groups/global/AllUsers"
	groupAuthenticated = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
	xsiNamespace       = "http://www.w3.org/2001/XMLSchema-instance"

	permRead        = "READ"
	permWrite       = "WRITE"
	permFullControl = "FULL_CONTROL"
)

// anonymousOwner is the owner of what anonymous requests create.
const anonymousOwner = "anonymous"

// normal returns the ACL with "" spelled private.
func (a cannedACL) normal() cannedACL {
	if a == "" {
		return aclPrivate
	}
	return a
}

// allUsersMay reports whether the ACL grants perm to everyone (AllUsers),
// which is what anonymous requests get.
func (a cannedACL) allUsersMay(perm string) bool {
	switch a {
	case aclPublicRead:
		return perm == permRead
	case aclPublicReadWrite:
		return perm == permRead || perm == permWrite
	}
	return false
}

// parseCannedACL checks an x-amz-acl value for a bucket or an object.
// "" is private.
func parseCannedACL(v string, forBucket bool) (cannedACL, error) {
	if v == "" {
		return aclPrivate, nil
	}
	list := objectACLs
	if forBucket {
		list = bucketACLs
	}
	for _, a := range list {
		if string(a) == v {
			return a, nil
		}
	}
	names := make([]string, len(list))
	for i, a := range list {
		names[i] = string(a)
	}
	return "", apiErr(ErrNotImplemented, "The canned ACL %q is not supported by Sluice; use one of %s", v, strings.Join(names, ", "))
}

// grantHeaders are the explicit-grant headers, which Sluice refuses: it
// keeps canned ACLs only.
var grantHeaders = []string{"X-Amz-Grant-Read", "X-Amz-Grant-Write", "X-Amz-Grant-Read-Acp", "X-Amz-Grant-Write-Acp", "X-Amz-Grant-Full-Control"}

// aclFromHeaders returns the canned ACL a request sets with x-amz-acl
// (private if none), refusing explicit grants.
func aclFromHeaders(h http.Header, forBucket bool) (cannedACL, error) {
	for _, name := range grantHeaders {
		if _, ok := h[name]; ok {
			return "", apiErr(ErrNotImplemented, "Explicit grants (%s) are not supported by Sluice; use a canned ACL (x-amz-acl)", strings.ToLower(name))
		}
	}
	return parseCannedACL(h.Get("X-Amz-Acl"), forBucket)
}

// grantKey identifies one grant independently of how it was written.
type grantKey struct {
	grantee    string // "id:ID" or "uri:URI"
	permission string
}

// grants returns the grant list an ACL stands for: the owner's full
// control and what the canned ACL adds. bucketOwner matters for the
// bucket-owner-* ACLs of objects.
func (a cannedACL) grants(own, bucketOwner owner) []grant {
	user := func(o owner, perm string) grant {
		return grant{Grantee: grantee{XMLNS: xsiNamespace, Type: "CanonicalUser", ID: o.ID, DisplayName: o.DisplayName}, Permission: perm}
	}
	group := func(uri, perm string) grant {
		return grant{Grantee: grantee{XMLNS: xsiNamespace, Type: "Group", URI: uri}, Permission: perm}
	}
	out := []grant{user(own, permFullControl)}
	switch a.normal() {
	case aclPublicRead:
		out = append(out, group(groupAllUsers, permRead))
	case aclPublicReadWrite:
		out = append(out, group(groupAllUsers, permRead), group(groupAllUsers, permWrite))
	case aclAuthenticatedRead:
		out = append(out, group(groupAuthenticated, permRead))
	case aclBucketOwnerRead:
		if bucketOwner.ID != own.ID {
			out = append(out, user(bucketOwner, permRead))
		}
	case aclBucketOwnerFull:
		if bucketOwner.ID != own.ID {
			out = append(out, user(bucketOwner, permFullControl))
		}
	}
	return out
}

func grantSet(gs []grant) map[grantKey]bool {
	set := make(map[grantKey]bool, len(gs))
	for _, g := range gs {
		k := grantKey{permission: g.Permission}
		if g.Grantee.URI != "" {
			k.grantee = "uri:" + g.Grantee.URI
		} else {
			k.grantee = "id:" + g.Grantee.ID
		}
		set[k] = true
	}
	return set
}

// aclFromPolicy maps an AccessControlPolicy document (PutBucketAcl,
// PutObjectAcl with a body) to the canned ACL with exactly its grants.
// Grant lists no canned ACL has (grants to other users or by e-mail,
// READ_ACP, no full control for the owner, ...) are NotImplemented.
func aclFromPolicy(p *aclPolicyRequest, own, bucketOwner owner, forBucket bool) (cannedACL, error) {
	want := make(map[grantKey]bool, len(p.Grants))
	for _, g := range p.Grants {
		ge := g.Grantee
		k := grantKey{permission: strings.TrimSpace(g.Permission)}
		switch {
		case ge.Email != "" || strings.EqualFold(ge.Type, "AmazonCustomerByEmail"):
			return "", apiErr(ErrNotImplemented, "Grants by e-mail address are not supported by Sluice; use a canned ACL")
		case ge.URI != "":
			k.grantee = "uri:" + strings.TrimSpace(ge.URI)
		case ge.ID != "":
			k.grantee = "id:" + strings.TrimSpace(ge.ID)
		default:
			return "", apiErr(ErrMalformedXML, "A grant has no grantee")
		}
		want[k] = true
	}
	list := objectACLs
	if forBucket {
		list = bucketACLs
	}
	for _, a := range list {
		have := grantSet(a.grants(own, bucketOwner))
		if len(have) != len(want) {
			continue
		}
		same := true
		for k := range want {
			if !have[k] {
				same = false
				break
			}
		}
		if same {
			return a, nil
		}
	}
	return "", apiErr(ErrNotImplemented, "Sluice keeps canned ACLs only (private, public-read, public-read-write, authenticated-read, and bucket-owner-read or bucket-owner-full-control for objects): this grant list is none of them")
}

// accessOp is what a request does, as far as ACLs are concerned.
type accessOp int

const (
	// opOther is everything no ACL grants to anonymous requests: the
	// service, bucket creation and deletion, configurations, ACLs,
	// tagging, copies.
	opOther accessOp = iota
	// opObjectRead: GetObject, HeadObject (also of one part). The
	// object's ACL decides.
	opObjectRead
	// opBucketRead: ListObjects (V1, V2), HeadBucket,
	// ListMultipartUploads. The bucket's ACL decides.
	opBucketRead
	// opBucketWrite: PutObject, DeleteObject, DeleteObjects and the
	// multipart upload calls. The bucket's ACL decides.
	opBucketWrite
)

func (o accessOp) String() string {
	switch o {
	case opObjectRead:
		return "object read"
	case opBucketRead:
		return "bucket read"
	case opBucketWrite:
		return "bucket write"
	}
	return "other"
}

// requestOp classifies a request by its method, key, query and headers.
// Anything it does not know is opOther, which anonymous requests never
// get.
func requestOp(method, bucket, key string, q url.Values, h http.Header) accessOp {
	if bucket == "" {
		return opOther
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if q.Has(n) {
				return true
			}
		}
		return false
	}
	// Subresources that are configuration or metadata: never anonymous.
	if has("acl", "tagging", "policy", "lifecycle", "cors", "encryption", "website", "replication",
		"object-lock", "notification", "logging", "accelerate", "requestPayment", "versioning", "location",
		"ownershipControls", "publicAccessBlock", "intelligent-tiering", "inventory", "metrics", "analytics",
		"attributes", "torrent", "legal-hold", "retention", "restore", "select", "versions") {
		return opOther
	}
	copySource := h.Get("X-Amz-Copy-Source") != ""
	if key == "" {
		switch method {
		case http.MethodGet:
			return opBucketRead // ListObjects, ListMultipartUploads (?uploads)
		case http.MethodHead:
			return opBucketRead
		case http.MethodPost:
			if has("delete") {
				return opBucketWrite
			}
		}
		return opOther
	}
	switch method {
	case http.MethodGet:
		if has("uploadId") {
			return opBucketWrite // ListParts: part of writing an object
		}
		return opObjectRead
	case http.MethodHead:
		return opObjectRead
	case http.MethodPut:
		if copySource {
			return opOther // would read another object without checking its ACL
		}
		return opBucketWrite
	case http.MethodDelete:
		if has("versionId") {
			return opOther // deletes a version for good: the owner's
		}
		return opBucketWrite
	case http.MethodPost:
		if has("uploads", "uploadId") {
			return opBucketWrite
		}
	}
	return opOther
}

// anonymousAllowed decides whether an anonymous request doing op may go
// on, given the canned ACL that governs it: the object's for opObjectRead,
// the bucket's otherwise.
func anonymousAllowed(op accessOp, acl cannedACL) bool {
	switch op {
	case opObjectRead, opBucketRead:
		return acl.allUsersMay(permRead)
	case opBucketWrite:
		return acl.allUsersMay(permWrite)
	}
	return false
}

// errAnonymousDenied is the answer to an anonymous request no ACL allows.
func errAnonymousDenied() error {
	return apiErr(ErrAccessDenied, "Access Denied: anonymous requests get only what the bucket's or the object's ACL grants to everyone; sign the request")
}

// readBucketACL returns a bucket's canned ACL: private when none is
// recorded, and private (fail closed) for a value it does not know.
func (g *Gateway) readBucketACL(ctx context.Context, bucket string) (cannedACL, error) {
	v, err := g.c.GetXattr(ctx, "/"+bucket, xattrACL)
	if err != nil {
		if errs.CodeOf(err) == errs.NoData {
			return aclPrivate, nil
		}
		return aclPrivate, err
	}
	a, perr := parseCannedACL(strings.TrimSpace(string(v)), true)
	if perr != nil {
		return aclPrivate, nil
	}
	return a, nil
}

// authorizeAnonymous is serve's check of an anonymous request: op comes
// from requestOp; object reads are checked later, in getObject, against
// the object's ACL.
func (g *Gateway) authorizeAnonymous(rq *request, op accessOp) error {
	switch op {
	case opObjectRead:
		return nil
	case opBucketRead, opBucketWrite:
		acl, err := g.readBucketACL(rq.ctx, rq.bucket)
		if err != nil || !anonymousAllowed(op, acl) {
			return errAnonymousDenied()
		}
		return nil
	}
	return errAnonymousDenied()
}

// authorizeObjectRead checks an anonymous read of an object. info is nil
// and statErr set when the object could not be found: anonymous clients
// learn that only from a bucket they may list, as in S3.
func (g *Gateway) authorizeObjectRead(rq *request, info *objInfo, statErr error) error {
	if !rq.auth.anonymous() {
		return statErr
	}
	if statErr != nil {
		acl, err := g.readBucketACL(rq.ctx, rq.bucket)
		if err == nil && anonymousAllowed(opBucketRead, acl) {
			return statErr
		}
		return errAnonymousDenied()
	}
	if !anonymousAllowed(opObjectRead, cannedACL(info.meta.ACL)) {
		return errAnonymousDenied()
	}
	return nil
}

// bucketOwner returns the recorded owner of a bucket ("" if none: a
// bucket made through POSIX, or before owners were recorded).
func (g *Gateway) bucketOwner(ctx context.Context, bucket string) string {
	v, err := g.c.GetXattr(ctx, "/"+bucket, xattrOwner)
	if err != nil {
		return ""
	}
	return string(v)
}

// ownerOr returns an owner for id, or def if id is empty.
func ownerOr(id string, def owner) owner {
	if id == "" {
		return def
	}
	return owner{ID: id, DisplayName: id}
}

func (g *Gateway) getBucketACL(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	acl, err := g.readBucketACL(rq.ctx, rq.bucket)
	if err != nil {
		return fsErr(err, ErrNoSuchBucket, "bucket "+rq.bucket)
	}
	own := ownerOr(g.bucketOwner(rq.ctx, rq.bucket), rq.owner())
	return writeXML(rq, accessControlPolicy{Xmlns: s3Namespace, Owner: own, Grants: acl.grants(own, own)})
}

// aclFromACLRequest reads the ACL of PutBucketAcl or PutObjectAcl: the
// x-amz-acl header or an AccessControlPolicy document, not both.
func (g *Gateway) aclFromACLRequest(rq *request, own, bucketOwner owner, forBucket bool) (cannedACL, error) {
	body, err := g.readDocument(rq, true)
	if err != nil {
		return "", err
	}
	var doc aclPolicyRequest
	empty, err := decodeXML(body, &doc, true)
	hasHeader := rq.r.Header.Get("X-Amz-Acl") != ""
	for _, name := range grantHeaders {
		if _, ok := rq.r.Header[name]; ok {
			hasHeader = true
		}
	}
	switch {
	case hasHeader && !empty:
		return "", apiErr(ErrUnexpectedContent, "This request does not support content: give either x-amz-acl or an AccessControlPolicy document")
	case hasHeader:
		return aclFromHeaders(rq.r.Header, forBucket)
	case err != nil:
		return "", err
	case empty:
		return "", apiErr(ErrMissingSecurityHeader, "Your request is missing a required header: x-amz-acl (or an AccessControlPolicy document)")
	}
	return aclFromPolicy(&doc, own, bucketOwner, forBucket)
}

// putBucketACL sets a bucket's canned ACL (docs/s3.md: what anonymous
// clients may list and write).
func (g *Gateway) putBucketACL(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	own := ownerOr(g.bucketOwner(rq.ctx, rq.bucket), rq.owner())
	acl, err := g.aclFromACLRequest(rq, own, own, true)
	if err != nil {
		return err
	}
	if err := g.setBucketACL(rq.ctx, rq.bucket, acl); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// setBucketACL records a bucket's ACL (private: no xattr).
func (g *Gateway) setBucketACL(ctx context.Context, bucket string, acl cannedACL) error {
	var err error
	if acl.normal() == aclPrivate {
		err = g.c.RemoveXattr(ctx, "/"+bucket, xattrACL)
		if errs.CodeOf(err) == errs.NoData {
			err = nil
		}
	} else {
		err = g.c.SetXattr(ctx, "/"+bucket, xattrACL, []byte(acl))
	}
	if err != nil {
		return fsErr(err, ErrNoSuchBucket, "bucket "+bucket)
	}
	return nil
}

func (g *Gateway) getObjectACL(rq *request) error {
	info, err := g.readTarget(rq)
	if err != nil {
		return err
	}
	bown := ownerOr(g.bucketOwner(rq.ctx, rq.bucket), rq.owner())
	own := ownerOr(info.meta.Owner, bown)
	return writeXML(rq, accessControlPolicy{Xmlns: s3Namespace, Owner: own, Grants: cannedACL(info.meta.ACL).grants(own, bown)})
}

// putObjectACL sets an object's canned ACL in its recorded metadata,
// leaving the rest (ETag, headers) as it is.
func (g *Gateway) putObjectACL(rq *request) error {
	info, err := g.readTarget(rq)
	if err != nil {
		return err
	}
	bown := ownerOr(g.bucketOwner(rq.ctx, rq.bucket), rq.owner())
	own := ownerOr(info.meta.Owner, bown)
	acl, err := g.aclFromACLRequest(rq, own, bown, false)
	if err != nil {
		return err
	}
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
	m.ACL = string(acl)
	if acl.normal() == aclPrivate {
		m.ACL = ""
	}
	if err := g.c.SetXattr(rq.ctx, info.path, xattrMeta, m.encode()); err != nil {
		return fsErr(err, ErrNoSuchKey, "key "+rq.key)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}
