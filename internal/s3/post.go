package s3

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// POST object uploads (docs/s3.md, "POST uploads"): HTML forms that
// upload a file straight from a browser. The form (multipart/form-data)
// carries the key, a policy document (base64 JSON: an expiration and
// conditions on the form's fields and the file's size) signed with SigV4
// (the signature of the base64 policy with the day's signing key), the
// object's metadata, and the file last. The fields are read and checked
// before the file streams into a temporary file like a PUT's.

var (
	ErrInvalidPolicyDocument = &APIError{Code: "InvalidPolicyDocument", Status: http.StatusBadRequest, Message: "The content of the form does not meet the conditions specified in the policy document."}
	errPolicyDenied          = &APIError{Code: "AccessDenied", Status: http.StatusForbidden, Message: "Invalid according to Policy"}
)

// maxPostFields bounds the form's fields before the file.
const maxPostFields = 64 << 10

// policyCond is one condition of a POST policy.
type policyCond struct {
	op       string // "eq", "starts-with" or "content-length-range"
	field    string // lowercase, without '$'
	value    string
	min, max int64
	text     string // as written, for error messages
}

// parsePostPolicy decodes a base64 policy document and checks that it has
// not expired.
func parsePostPolicy(b64 string, now time.Time) ([]policyCond, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, apiErr(ErrInvalidPolicyDocument, "Invalid Policy: the policy is not valid base64")
	}
	var doc struct {
		Expiration string            `json:"expiration"`
		Conditions []json.RawMessage `json:"conditions"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, apiErr(ErrInvalidPolicyDocument, "Invalid Policy: Invalid JSON.")
	}
	exp, err := time.Parse(time.RFC3339Nano, doc.Expiration)
	if err != nil {
		return nil, apiErr(ErrInvalidPolicyDocument, "Invalid Policy: Invalid 'expiration' value: %q", doc.Expiration)
	}
	if !now.Before(exp) {
		return nil, apiErr(errPolicyDenied, "Invalid according to Policy: Policy expired.")
	}
	var out []policyCond
	for _, c := range doc.Conditions {
		pc, err := parsePolicyCondition(c)
		if err != nil {
			return nil, err
		}
		out = append(out, pc...)
	}
	return out, nil
}

func parsePolicyCondition(c json.RawMessage) ([]policyCond, error) {
	bad := apiErr(ErrInvalidPolicyDocument, "Invalid Policy: Invalid Condition: %s", string(c))
	var obj map[string]any
	if json.Unmarshal(c, &obj) == nil {
		var out []policyCond
		for k, v := range obj {
			s, ok := v.(string)
			if !ok {
				return nil, bad
			}
			out = append(out, policyCond{op: "eq", field: strings.ToLower(k), value: s, text: string(c)})
		}
		return out, nil
	}
	var arr []any
	dec := json.NewDecoder(strings.NewReader(string(c)))
	dec.UseNumber()
	if dec.Decode(&arr) != nil || len(arr) != 3 {
		return nil, bad
	}
	op, _ := arr[0].(string)
	switch op = strings.ToLower(op); op {
	case "eq", "starts-with":
		f, ok1 := arr[1].(string)
		v, ok2 := arr[2].(string)
		if !ok1 || !ok2 || !strings.HasPrefix(f, "$") {
			return nil, bad
		}
		return []policyCond{{op: op, field: strings.ToLower(f[1:]), value: v, text: string(c)}}, nil
	case "content-length-range":
		lo, err1 := jsonInt(arr[1])
		hi, err2 := jsonInt(arr[2])
		if err1 != nil || err2 != nil || lo < 0 || hi < lo {
			return nil, bad
		}
		return []policyCond{{op: op, min: lo, max: hi, text: string(c)}}, nil
	}
	return nil, bad
}

func jsonInt(v any) (int64, error) {
	switch n := v.(type) {
	case json.Number:
		return n.Int64()
	case string:
		return strconv.ParseInt(n, 10, 64)
	}
	return 0, errors.New("not a number")
}

// postFieldExempt reports whether a form field needs no condition.
func postFieldExempt(name string) bool {
	switch name {
	case "policy", "x-amz-signature", "file", "signature", "awsaccesskeyid":
		return true
	}
	return strings.HasPrefix(name, "x-ignore-")
}

// checkPostPolicy checks the form's fields (lowercase names) against the
// policy's conditions: each condition must hold and each field must be
// named by one. It returns the file size range the policy allows (0 and
// -1 if it has none).
func checkPostPolicy(conds []policyCond, bucket string, fields map[string]string) (minSize, maxSize int64, err error) {
	maxSize = -1
	covered := map[string]bool{}
	for _, c := range conds {
		if c.op == "content-length-range" {
			minSize, maxSize = c.min, c.max
			continue
		}
		covered[c.field] = true
		v, ok := fields[c.field]
		if c.field == "bucket" {
			v, ok = bucket, true
		}
		var holds bool
		switch c.op {
		case "eq":
			holds = ok && v == c.value
		case "starts-with":
			holds = ok && strings.HasPrefix(v, c.value)
			if c.field == "content-type" && ok {
				// Content-Type may list several types: each must match.
				holds = true
				for t := range strings.SplitSeq(v, ",") {
					holds = holds && strings.HasPrefix(strings.TrimSpace(t), c.value)
				}
			}
		}
		if !holds {
			return 0, 0, apiErr(errPolicyDenied, "Invalid according to Policy: Policy Condition failed: %s", c.text)
		}
	}
	var extra []string
	for name := range fields {
		if !postFieldExempt(name) && !covered[name] {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		return 0, 0, apiErr(errPolicyDenied, "Invalid according to Policy: Extra input fields: %s", strings.Join(extra, ", "))
	}
	return minSize, maxSize, nil
}

// postRedirect is the Location of success_action_redirect: the URL with
// the bucket, key and ETag added to its query ("" if the URL is not one).
func postRedirect(target, bucket, key, etag string) string {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	q := u.Query()
	q.Set("bucket", bucket)
	q.Set("key", key)
	q.Set("etag", `"`+etag+`"`)
	u.RawQuery = q.Encode()
	return u.String()
}

// isPostForm reports whether r is a POST object upload: a POST to a
// bucket with a multipart/form-data body.
func isPostForm(r *http.Request, key string) bool {
	if r.Method != http.MethodPost || key != "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// postResponse is the document of success_action_status 201.
type postResponse struct {
	XMLName  xml.Name `xml:"PostResponse"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
}

// authorizePost checks a form's signature (SigV4 of the policy) and its
// policy, or for a form without one that anonymous clients may write to
// the bucket. It returns the size range the policy allows and the
// uploader's access key ("" if anonymous).
func (g *Gateway) authorizePost(rq *request, fields map[string]string) (minSize, maxSize int64, accessKey string, err error) {
	if fields["awsaccesskeyid"] != "" || fields["signature"] != "" {
		return 0, 0, "", ErrUnsupportedSignatureV2
	}
	policy, sig := fields["policy"], fields["x-amz-signature"]
	if policy == "" && sig == "" {
		acl, err := g.readBucketACL(rq.ctx, rq.bucket)
		if err != nil || !anonymousAllowed(opBucketWrite, acl) {
			return 0, 0, "", errAnonymousDenied()
		}
		return 0, -1, "", nil
	}
	if policy == "" || sig == "" {
		return 0, 0, "", apiErr(ErrInvalidArgument, "POST requires a policy and an x-amz-signature field, or neither")
	}
	if fields["x-amz-algorithm"] != sigAlgorithm {
		return 0, 0, "", apiErr(ErrInvalidArgument, "x-amz-algorithm must be %s", sigAlgorithm)
	}
	cred, err := parseCredential(fields["x-amz-credential"])
	if err != nil || cred.Service != "s3" {
		return 0, 0, "", apiErr(ErrInvalidArgument, "The x-amz-credential field is malformed")
	}
	amzDate := fields["x-amz-date"]
	if _, err := time.Parse(timeFormat, amzDate); err != nil || cred.Date != amzDate[:8] {
		return 0, 0, "", apiErr(ErrInvalidArgument, "The x-amz-date field is malformed or is not the credential's date")
	}
	secret, err := g.secretFor(cred.AccessKey)
	if err != nil {
		return 0, 0, "", err
	}
	want := hex.EncodeToString(hmacSHA256(g.sigKeys.get(secret, cred), policy))
	if subtle.ConstantTimeCompare([]byte(want), []byte(strings.ToLower(sig))) != 1 {
		return 0, 0, "", apiErr(ErrSignatureDoesNotMatch, "The request signature we calculated does not match the signature you provided. Check your key and signing method.")
	}
	conds, err := parsePostPolicy(policy, g.now())
	if err != nil {
		return 0, 0, "", err
	}
	minSize, maxSize, err = checkPostPolicy(conds, rq.bucket, fields)
	return minSize, maxSize, cred.AccessKey, err
}

// postObject is a POST object upload.
func (g *Gateway) postObject(rq *request) error {
	mr, err := rq.r.MultipartReader()
	if err != nil {
		return apiErr(ErrMalformedPOSTRequest, "The body of your POST request is not well-formed multipart/form-data.")
	}
	fields := map[string]string{}
	var file *multipart.Part
	total := 0
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return apiErr(ErrMalformedPOSTRequest, "The body of your POST request is not well-formed multipart/form-data.")
		}
		name := strings.ToLower(p.FormName())
		if name == "file" {
			file = p
			break
		}
		b, err := io.ReadAll(io.LimitReader(p, maxPostFields+1-int64(total)))
		if err != nil {
			return bodyErr(err)
		}
		if total += len(b); total > maxPostFields {
			return apiErr(ErrMaxMessageLengthExceeded, "The form fields are larger than %d bytes", maxPostFields)
		}
		if _, dup := fields[name]; !dup {
			fields[name] = string(b)
		}
	}
	if file == nil {
		return apiErr(ErrInvalidArgument, "POST requires exactly one file upload per request.")
	}
	if fields["key"] == "" {
		return apiErr(ErrInvalidArgument, "Bucket POST must contain a field named 'key'.")
	}
	minSize, maxSize, accessKey, err := g.authorizePost(rq, fields)
	if err != nil {
		return err
	}
	rq.auth = &authInfo{AccessKey: accessKey, PayloadHash: payloadUnsigned}
	rq.key = strings.ReplaceAll(fields["key"], "${filename}", file.FileName())
	h := http.Header{}
	for name, v := range fields {
		switch {
		case name == "acl":
			h.Set("X-Amz-Acl", v)
		case name == "content-type" || name == "expires" || strings.HasPrefix(name, "x-amz-") || strings.HasPrefix(name, "cache-control") || strings.HasPrefix(name, "content-"):
			h.Set(name, v)
		}
	}
	if err := refuseSSE(h); err != nil {
		return err
	}
	_, isDir, err := objectPath(rq.bucket, rq.key)
	if err != nil {
		return err
	}
	if isDir {
		return apiErr(ErrInvalidObjectName, "The key %q ends in '/' and so names a directory, which cannot hold data", rq.key)
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
	if t := fields["tagging"]; t != "" {
		var doc tagging
		if _, err := decodeXML(strings.NewReader(t), &doc, false); err != nil {
			return err
		}
		pairs := make([][2]string, len(doc.TagSet.Tags))
		for i, tg := range doc.TagSet.Tags {
			pairs[i] = [2]string{tg.Key, tg.Value}
		}
		if meta.Tags, err = checkTags(pairs, maxObjectTags, false); err != nil {
			return err
		}
	}
	limit := g.opts.MaxPutSize
	if maxSize >= 0 {
		limit = min(limit, maxSize)
	}
	v := &verifier{r: file, want: -1, max: limit, md5: md5.New()}
	tmp, err := g.writeTemp(rq.ctx, rq.bucket, v)
	if err != nil {
		return err
	}
	if v.n < minSize {
		g.discard(rq.ctx, tmp)
		return apiErr(ErrEntityTooSmall, "Your proposed upload is smaller than the minimum allowed size: %d bytes, the policy asks for at least %d", v.n, minSize)
	}
	meta.ETag = v.etag()
	if _, err := g.commitObject(rq.ctx, rq.bucket, rq.key, tmp, meta, false); err != nil {
		return err
	}
	// Durable before the answer, as a PUT (ADR 0006): the key's
	// publication is metadata.
	if err := g.c.SyncMeta(rq.ctx); err != nil {
		return fsErr(err, ErrInternal, "key "+rq.key)
	}
	return g.postAnswer(rq, fields, meta)
}

// postAnswer sends the response success_action_redirect or
// success_action_status asks for (204 by default).
func (g *Gateway) postAnswer(rq *request, fields map[string]string, meta *objectMeta) error {
	hdr := rq.w.Header()
	loc := "http://" + rq.r.Host + "/" + rq.bucket + "/" + awsURIEncode(rq.key, true)
	hdr.Set("ETag", `"`+meta.ETag+`"`)
	hdr.Set("Location", loc)
	if meta.VersionID != "" {
		hdr.Set("X-Amz-Version-Id", meta.VersionID)
	}
	target := fields["success_action_redirect"]
	if target == "" {
		target = fields["redirect"]
	}
	if to := postRedirect(target, rq.bucket, rq.key, meta.ETag); to != "" {
		hdr.Set("Location", to)
		rq.w.WriteHeader(http.StatusSeeOther)
		return nil
	}
	switch fields["success_action_status"] {
	case "200":
		rq.w.WriteHeader(http.StatusOK)
	case "201":
		hdr.Set("Content-Type", "application/xml")
		rq.w.WriteHeader(http.StatusCreated)
		io.WriteString(rq.w, xml.Header)
		return xml.NewEncoder(rq.w).Encode(postResponse{Location: loc, Bucket: rq.bucket, Key: rq.key, ETag: `"` + meta.ETag + `"`})
	default:
		rq.w.WriteHeader(http.StatusNoContent)
	}
	return nil
}
