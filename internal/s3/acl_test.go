package s3

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestRequestOp(t *testing.T) {
	t.Parallel()
	q := func(s string) url.Values {
		v, err := url.ParseQuery(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	copyHdr := http.Header{"X-Amz-Copy-Source": {"/b/src"}}
	tests := []struct {
		method, bucket, key, query string
		h                          http.Header
		want                       accessOp
	}{
		{"GET", "", "", "", nil, opOther}, // ListBuckets
		{"GET", "b", "", "", nil, opBucketRead},
		{"GET", "b", "", "list-type=2&prefix=a", nil, opBucketRead},
		{"GET", "b", "", "uploads", nil, opBucketRead},
		{"HEAD", "b", "", "", nil, opBucketRead},
		{"GET", "b", "", "acl", nil, opOther},
		{"GET", "b", "", "location", nil, opOther},
		{"GET", "b", "", "policy", nil, opOther},
		{"GET", "b", "", "versioning", nil, opOther},
		{"GET", "b", "", "versions", nil, opOther},
		{"PUT", "b", "", "", nil, opOther},
		{"PUT", "b", "", "acl", nil, opOther},
		{"DELETE", "b", "", "", nil, opOther},
		{"POST", "b", "", "delete", nil, opBucketWrite},
		{"POST", "b", "", "", nil, opOther},
		{"GET", "b", "k", "", nil, opObjectRead},
		{"HEAD", "b", "k", "", nil, opObjectRead},
		{"GET", "b", "k", "partNumber=2", nil, opObjectRead},
		{"GET", "b", "k", "acl", nil, opOther},
		{"GET", "b", "k", "tagging", nil, opOther},
		{"GET", "b", "k", "attributes", nil, opOther},
		{"GET", "b", "k", "uploadId=x", nil, opBucketWrite},
		{"PUT", "b", "k", "", nil, opBucketWrite},
		{"PUT", "b", "k", "", copyHdr, opOther},
		{"PUT", "b", "k", "partNumber=1&uploadId=x", nil, opBucketWrite},
		{"PUT", "b", "k", "partNumber=1&uploadId=x", copyHdr, opOther},
		{"PUT", "b", "k", "acl", nil, opOther},
		{"PUT", "b", "k", "tagging", nil, opOther},
		{"DELETE", "b", "k", "", nil, opBucketWrite},
		{"DELETE", "b", "k", "uploadId=x", nil, opBucketWrite},
		{"DELETE", "b", "k", "tagging", nil, opOther},
		{"POST", "b", "k", "uploads", nil, opBucketWrite},
		{"POST", "b", "k", "uploadId=x", nil, opBucketWrite},
		{"POST", "b", "k", "restore", nil, opOther},
		{"POST", "b", "k", "", nil, opOther},
		{"OPTIONS", "b", "k", "", nil, opOther},
		{"PATCH", "b", "k", "", nil, opOther},
	}
	for _, tc := range tests {
		h := tc.h
		if h == nil {
			h = http.Header{}
		}
		if got := requestOp(tc.method, tc.bucket, tc.key, q(tc.query), h); got != tc.want {
			t.Errorf("requestOp(%s /%s/%s?%s) = %v, want %v", tc.method, tc.bucket, tc.key, tc.query, got, tc.want)
		}
	}
}

func TestAnonymousAllowed(t *testing.T) {
	t.Parallel()
	// The whole matrix: which canned ACL lets anonymous clients do what.
	want := map[cannedACL]map[accessOp]bool{
		"":                   {},
		aclPrivate:           {},
		aclPublicRead:        {opObjectRead: true, opBucketRead: true},
		aclPublicReadWrite:   {opObjectRead: true, opBucketRead: true, opBucketWrite: true},
		aclAuthenticatedRead: {},
		aclBucketOwnerRead:   {},
		aclBucketOwnerFull:   {},
		"garbage":            {},
	}
	for acl, ops := range want {
		for _, op := range []accessOp{opOther, opObjectRead, opBucketRead, opBucketWrite} {
			if got := anonymousAllowed(op, acl); got != ops[op] {
				t.Errorf("anonymousAllowed(%v, %q) = %v, want %v", op, acl, got, ops[op])
			}
		}
	}
}

func TestParseCannedACL(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "private", "public-read", "public-read-write", "authenticated-read"} {
		for _, bucket := range []bool{true, false} {
			if _, err := parseCannedACL(v, bucket); err != nil {
				t.Errorf("parseCannedACL(%q, %v): %v", v, bucket, err)
			}
		}
	}
	for _, v := range []string{"bucket-owner-read", "bucket-owner-full-control"} {
		if _, err := parseCannedACL(v, false); err != nil {
			t.Errorf("object ACL %q: %v", v, err)
		}
		if _, err := parseCannedACL(v, true); !isCode(err, "NotImplemented") {
			t.Errorf("bucket ACL %q: %v, want NotImplemented", v, err)
		}
	}
	for _, v := range []string{"aws-exec-read", "log-delivery-write", "Public-Read", "public-read "} {
		if _, err := parseCannedACL(v, false); !isCode(err, "NotImplemented") {
			t.Errorf("%q: %v, want NotImplemented", v, err)
		}
	}
	h := http.Header{"X-Amz-Grant-Read": {`uri="http://acs.amazonaws.com/groups/global/AllUsers"`}}
	if _, err := aclFromHeaders(h, false); !isCode(err, "NotImplemented") {
		t.Errorf("grant header: %v, want NotImplemented", err)
	}
}

// policyDoc renders grants as a client would send them.
func policyDoc(own owner, gs []grant) *aclPolicyRequest {
	b, err := xml.Marshal(accessControlPolicy{Xmlns: s3Namespace, Owner: own, Grants: gs})
	if err != nil {
		panic(err)
	}
	var p aclPolicyRequest
	if _, err := decodeXML(strings.NewReader(string(b)), &p, false); err != nil {
		panic(err)
	}
	return &p
}

func TestACLFromPolicy(t *testing.T) {
	t.Parallel()
	own, bown, other := owner{ID: "AK1", DisplayName: "AK1"}, owner{ID: "AK2", DisplayName: "AK2"}, owner{ID: "AK3"}
	// Every canned ACL's grants map back to it (GetObjectAcl output
	// accepted by PutObjectAcl).
	for _, bucket := range []bool{true, false} {
		list := objectACLs
		if bucket {
			list = bucketACLs
		}
		for _, a := range list {
			got, err := aclFromPolicy(policyDoc(own, a.grants(own, bown)), own, bown, bucket)
			if err != nil || got != a {
				t.Errorf("bucket=%v: grants of %q map to %q, %v", bucket, a, got, err)
			}
		}
	}
	refused := map[string][]grant{
		"grant to another user": append(aclPrivate.grants(own, own), grant{Grantee: grantee{Type: "CanonicalUser", ID: other.ID}, Permission: permRead}),
		"READ_ACP to everyone":  append(aclPrivate.grants(own, own), grant{Grantee: grantee{Type: "Group", URI: groupAllUsers}, Permission: "READ_ACP"}),
		"no owner grant":        {{Grantee: grantee{Type: "Group", URI: groupAllUsers}, Permission: permRead}},
		"by e-mail":             {{Grantee: grantee{Type: "AmazonCustomerByEmail"}, Permission: permRead}},
		"WRITE only":            append(aclPrivate.grants(own, own), grant{Grantee: grantee{Type: "Group", URI: groupAllUsers}, Permission: permWrite}),
	}
	for name, gs := range refused {
		if a, err := aclFromPolicy(policyDoc(own, gs), own, bown, false); !isCode(err, "NotImplemented") {
			t.Errorf("%s: %q %v, want NotImplemented", name, a, err)
		}
	}
	// A document as boto3 sends it (xsi:type with its namespace).
	doc := `<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>AK1</ID></Owner><AccessControlList>
<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"><ID>AK1</ID></Grantee><Permission>FULL_CONTROL</Permission></Grant>
<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Group"><URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee><Permission>READ</Permission></Grant>
</AccessControlList></AccessControlPolicy>`
	var p aclPolicyRequest
	if _, err := decodeXML(strings.NewReader(doc), &p, false); err != nil {
		t.Fatal(err)
	}
	if a, err := aclFromPolicy(&p, own, bown, false); err != nil || a != aclPublicRead {
		t.Errorf("boto3 document: %q %v", a, err)
	}
}

func TestBucketExistsError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		isDir            bool
		owner, requester string
		code             string
	}{
		{true, "AK1", "AK1", "BucketAlreadyOwnedByYou"},
		{true, "", "AK1", "BucketAlreadyOwnedByYou"}, // no recorded owner
		{true, "AK1", "AK2", "BucketAlreadyExists"},
		{true, "AK1", anonymousOwner, "BucketAlreadyExists"},
		{false, "", "AK1", "BucketAlreadyExists"}, // a file of that name
	}
	for _, tc := range tests {
		if err := bucketExistsError(tc.isDir, tc.owner, tc.requester); !isCode(err, tc.code) || err.(*APIError).Status != 409 {
			t.Errorf("%+v: %v, want 409 %s", tc, err, tc.code)
		}
	}
}
