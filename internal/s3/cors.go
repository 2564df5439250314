package s3

import (
	"encoding/json"
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-fs/sluice/internal/errs"
)

// CORS (docs/s3.md, "CORS"). A bucket's CORS configuration is the xattr
// user.s3.cors of its directory (its rules, JSON), cached like the other
// bucket configurations (bucketconfig.go).
//
// Preflights (OPTIONS) are never authenticated: browsers send them without
// credentials, and a presigned URL's signature is for another method. They
// are answered before the signature is looked at, from the bucket's rules:
// 400 without an Origin or Access-Control-Request-Method header, 403
// AccessForbidden when the bucket has no configuration or no rule allows
// the origin, method and headers, else 200 with the Access-Control-*
// headers of the first rule that does. Other requests with an Origin get
// the Access-Control-* headers of the first rule that allows their origin
// and method, on success and on errors (so that a browser can read the
// error).

const (
	xattrCORS = "user.s3.cors"

	maxCORSRules = 100
	// maxCORSConfig bounds the stored rules (S3 bounds the document to
	// 64 KB; an xattr holds 64 KiB).
	maxCORSConfig = 60 << 10
)

var (
	errCORSBadRequest = &APIError{Code: "BadRequest", Status: http.StatusBadRequest, Message: "Insufficient information. Origin request header needed."}
	errCORSNoMethod   = &APIError{Code: "BadRequest", Status: http.StatusBadRequest, Message: "Insufficient information. Access-Control-Request-Method header needed."}
	errCORSNotEnabled = &APIError{Code: "AccessForbidden", Status: http.StatusForbidden, Message: "CORSResponse: CORS is not enabled for this bucket."}
	errCORSNotAllowed = &APIError{Code: "AccessForbidden", Status: http.StatusForbidden, Message: "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."}
	errNoSuchCORS     = &APIError{Code: "NoSuchCORSConfiguration", Status: http.StatusNotFound, Message: "The CORS configuration does not exist"}
)

// corsRule is one CORSRule, as stored and as the XML has it.
type corsRule struct {
	ID             string   `json:"id,omitempty" xml:"ID,omitempty"`
	AllowedOrigins []string `json:"origins" xml:"AllowedOrigin"`
	AllowedMethods []string `json:"methods" xml:"AllowedMethod"`
	AllowedHeaders []string `json:"headers,omitempty" xml:"AllowedHeader"`
	ExposeHeaders  []string `json:"expose,omitempty" xml:"ExposeHeader"`
	MaxAgeSeconds  *int     `json:"max_age,omitempty" xml:"MaxAgeSeconds,omitempty"`
}

// corsConfiguration is the document of Put/GetBucketCors.
type corsConfiguration struct {
	XMLName xml.Name   `xml:"CORSConfiguration"`
	Xmlns   string     `xml:"xmlns,attr,omitempty"`
	Rules   []corsRule `xml:"CORSRule"`
}

// corsMethods are the methods a rule may allow.
var corsMethods = map[string]bool{"GET": true, "PUT": true, "POST": true, "DELETE": true, "HEAD": true}

// checkCORSRules validates a configuration's rules as S3 does.
func checkCORSRules(rules []corsRule) error {
	if len(rules) == 0 {
		return apiErr(ErrMalformedXML, "A CORS configuration needs at least one CORSRule")
	}
	if len(rules) > maxCORSRules {
		return apiErr(ErrMalformedXML, "A CORS configuration has at most %d rules", maxCORSRules)
	}
	for i := range rules {
		r := &rules[i]
		if len(r.AllowedOrigins) == 0 || len(r.AllowedMethods) == 0 {
			return apiErr(ErrMalformedXML, "Each CORSRule needs an AllowedOrigin and an AllowedMethod")
		}
		for j, m := range r.AllowedMethods {
			m = strings.TrimSpace(m)
			if !corsMethods[m] {
				return apiErr(ErrInvalidRequest, "Found unsupported HTTP method in CORS config. Unsupported method is %s", m)
			}
			r.AllowedMethods[j] = m
		}
		for j, o := range r.AllowedOrigins {
			o = strings.TrimSpace(o)
			if o == "" || strings.Count(o, "*") > 1 {
				return apiErr(ErrInvalidRequest, "AllowedOrigin %q can not have more than one wildcard.", o)
			}
			r.AllowedOrigins[j] = o
		}
		for j, h := range r.AllowedHeaders {
			h = strings.TrimSpace(h)
			if strings.Count(h, "*") > 1 {
				return apiErr(ErrInvalidRequest, "AllowedHeader %q can not have more than one wildcard.", h)
			}
			r.AllowedHeaders[j] = h
		}
		if r.MaxAgeSeconds != nil && *r.MaxAgeSeconds < 0 {
			return apiErr(ErrMalformedXML, "MaxAgeSeconds must not be negative")
		}
		if len(r.ID) > 255 {
			return apiErr(ErrInvalidArgument, "A CORSRule ID has at most 255 characters")
		}
	}
	return nil
}

// wildcardMatch matches s against a pattern with at most one '*'.
func wildcardMatch(pattern, s string) bool {
	pre, suf, ok := strings.Cut(pattern, "*")
	if !ok {
		return pattern == s
	}
	return len(s) >= len(pre)+len(suf) && strings.HasPrefix(s, pre) && strings.HasSuffix(s, suf)
}

// allows reports whether the rule allows the origin, the method and every
// request header (names, any case).
func (r *corsRule) allows(origin, method string, headers []string) bool {
	okOrigin := false
	for _, o := range r.AllowedOrigins {
		if wildcardMatch(o, origin) {
			okOrigin = true
			break
		}
	}
	okMethod := false
	for _, m := range r.AllowedMethods {
		if m == method {
			okMethod = true
			break
		}
	}
	if !okOrigin || !okMethod {
		return false
	}
	for _, h := range headers {
		ok := false
		for _, a := range r.AllowedHeaders {
			if wildcardMatch(strings.ToLower(a), strings.ToLower(h)) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// matchCORS returns the first rule that allows the request (nil if none).
func matchCORS(rules []corsRule, origin, method string, headers []string) *corsRule {
	for i := range rules {
		if rules[i].allows(origin, method, headers) {
			return &rules[i]
		}
	}
	return nil
}

// requestHeaderList splits Access-Control-Request-Headers.
func requestHeaderList(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Access-Control-Request-Headers") {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				out = append(out, strings.ToLower(name))
			}
		}
	}
	return out
}

// setCORSHeaders writes the Access-Control-* headers of rule r for a
// request from origin; preflight adds those only preflights get.
func setCORSHeaders(out http.Header, r *corsRule, origin string, preflight bool, reqHeaders []string) {
	allowOrigin := origin
	if len(r.AllowedOrigins) == 1 && r.AllowedOrigins[0] == "*" {
		allowOrigin = "*"
	} else {
		out.Set("Access-Control-Allow-Credentials", "true")
	}
	out.Set("Access-Control-Allow-Origin", allowOrigin)
	out.Set("Access-Control-Allow-Methods", strings.Join(r.AllowedMethods, ", "))
	if len(r.ExposeHeaders) > 0 {
		out.Set("Access-Control-Expose-Headers", strings.Join(r.ExposeHeaders, ", "))
	}
	if r.MaxAgeSeconds != nil {
		out.Set("Access-Control-Max-Age", strconv.Itoa(*r.MaxAgeSeconds))
	}
	if preflight && len(reqHeaders) > 0 {
		out.Set("Access-Control-Allow-Headers", strings.Join(reqHeaders, ", "))
	}
	out.Add("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
}

// corsPreflight answers an OPTIONS request with headers h for a bucket
// with rules (nil: no configuration), setting the response headers in out.
func corsPreflight(h http.Header, rules []corsRule, out http.Header) error {
	origin, method := h.Get("Origin"), h.Get("Access-Control-Request-Method")
	switch {
	case origin == "":
		return errCORSBadRequest
	case method == "":
		return errCORSNoMethod
	case rules == nil:
		return errCORSNotEnabled
	}
	reqHeaders := requestHeaderList(h)
	r := matchCORS(rules, origin, method, reqHeaders)
	if r == nil {
		return errCORSNotAllowed
	}
	setCORSHeaders(out, r, origin, true, reqHeaders)
	return nil
}

// bucketCORS returns a bucket's CORS rules (nil if none, or no bucket).
func (g *Gateway) bucketCORS(rq *request) []corsRule {
	if rq.bucket == "" || !validBucketName(rq.bucket) {
		return nil
	}
	v, err := g.bucketAttr(rq.ctx, rq.bucket, xattrCORS)
	if err != nil || v == nil {
		return nil
	}
	var rules []corsRule
	if err := json.Unmarshal(v, &rules); err != nil {
		g.log.Warn("s3: a bucket's CORS configuration is unreadable", "bucket", rq.bucket, "err", err)
		return nil
	}
	return rules
}

// preflight answers OPTIONS.
func (g *Gateway) preflight(rq *request) error {
	h := rq.r.Header
	if h.Get("Origin") == "" || h.Get("Access-Control-Request-Method") == "" {
		return corsPreflight(h, nil, nil)
	}
	if err := corsPreflight(h, g.bucketCORS(rq), rq.w.Header()); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// addCORSHeaders adds the Access-Control-* headers to the response to a
// request with an Origin, when a rule of the bucket allows it.
func (g *Gateway) addCORSHeaders(rq *request) {
	origin := rq.r.Header.Get("Origin")
	if origin == "" {
		return
	}
	rules := g.bucketCORS(rq)
	if rules == nil {
		return
	}
	if r := matchCORS(rules, origin, rq.r.Method, nil); r != nil {
		setCORSHeaders(rq.w.Header(), r, origin, false, nil)
	}
}

func (g *Gateway) getBucketCORS(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	rules := g.bucketCORS(rq)
	if rules == nil {
		return apiErr(errNoSuchCORS, "The CORS configuration does not exist")
	}
	return writeXML(rq, corsConfiguration{Xmlns: s3Namespace, Rules: rules})
}

func (g *Gateway) putBucketCORS(rq *request) error {
	body, err := g.readDocument(rq, true)
	if err != nil {
		return err
	}
	var doc corsConfiguration
	if _, err := decodeXML(body, &doc, false); err != nil {
		return err
	}
	if err := checkCORSRules(doc.Rules); err != nil {
		return err
	}
	val, err := json.Marshal(doc.Rules)
	if err != nil {
		return wrapErr(ErrInternal, errs.New(errs.Invalid, "s3: CORS rules do not marshal: %v", err), "%s", ErrInternal.Message)
	}
	if len(val) > maxCORSConfig {
		return apiErr(ErrInvalidRequest, "The CORS configuration is too large: %d bytes stored, the limit is %d", len(val), maxCORSConfig)
	}
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	if err := g.setBucketAttr(rq.ctx, rq.bucket, xattrCORS, val); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (g *Gateway) deleteBucketCORS(rq *request) error {
	if err := g.checkBucket(rq); err != nil {
		return err
	}
	if err := g.setBucketAttr(rq.ctx, rq.bucket, xattrCORS, nil); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}
