package s3

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func policyB64(doc string) string { return base64.StdEncoding.EncodeToString([]byte(doc)) }

func TestParsePostPolicy(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	conds, err := parsePostPolicy(policyB64(`{"expiration": "2024-05-01T13:00:00.000Z", "conditions": [
		{"bucket": "b"}, ["starts-with", "$key", "u/"], {"acl": "public-read"}, ["content-length-range", 1, 1048576], ["eq", "$Content-Type", "text/plain"]]}`), now)
	if err != nil || len(conds) != 5 {
		t.Fatalf("%+v %v", conds, err)
	}
	if c := conds[3]; c.op != "content-length-range" || c.min != 1 || c.max != 1048576 {
		t.Errorf("range: %+v", c)
	}
	if c := conds[4]; c.op != "eq" || c.field != "content-type" || c.value != "text/plain" {
		t.Errorf("eq: %+v", c)
	}
	for name, tc := range map[string]struct {
		b64  string
		code string
	}{
		"expired":       {policyB64(`{"expiration": "2024-05-01T11:59:59Z", "conditions": []}`), "AccessDenied"},
		"not base64":    {"%%%", "InvalidPolicyDocument"},
		"not JSON":      {policyB64(`{"expiration": `), "InvalidPolicyDocument"},
		"no expiration": {policyB64(`{"conditions": []}`), "InvalidPolicyDocument"},
		"bad operator":  {policyB64(`{"expiration": "2030-01-01T00:00:00Z", "conditions": [["ends-with", "$key", "x"]]}`), "InvalidPolicyDocument"},
		"no $":          {policyB64(`{"expiration": "2030-01-01T00:00:00Z", "conditions": [["eq", "key", "x"]]}`), "InvalidPolicyDocument"},
		"bad range":     {policyB64(`{"expiration": "2030-01-01T00:00:00Z", "conditions": [["content-length-range", 10, 1]]}`), "InvalidPolicyDocument"},
	} {
		if _, err := parsePostPolicy(tc.b64, now); !isCode(err, tc.code) {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
}

func TestCheckPostPolicy(t *testing.T) {
	t.Parallel()
	conds, err := parsePostPolicy(policyB64(`{"expiration": "2030-01-01T00:00:00Z", "conditions": [
		{"bucket": "b"}, ["starts-with", "$key", "u/"], ["starts-with", "$Content-Type", "image/"], ["content-length-range", 5, 10],
		{"x-amz-algorithm": "AWS4-HMAC-SHA256"}, ["starts-with", "$x-amz-meta-tag", ""]]}`), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]string{"key": "u/a.jpg", "content-type": "image/jpeg", "x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-meta-tag": "anything",
		"policy": "...", "x-amz-signature": "...", "x-ignore-me": "1"}
	lo, hi, err := checkPostPolicy(conds, "b", good)
	if err != nil || lo != 5 || hi != 10 {
		t.Fatalf("good form: %d %d %v", lo, hi, err)
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range good {
			m[a] = b
		}
		if v == "\x00" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for name, tc := range map[string]struct {
		bucket string
		fields map[string]string
		msg    string
	}{
		"other bucket":        {"c", good, "Policy Condition failed"},
		"key outside":         {"b", with("key", "v/a.jpg"), "Policy Condition failed"},
		"type":                {"b", with("content-type", "text/plain"), "Policy Condition failed"},
		"one type of two":     {"b", with("content-type", "image/png, text/plain"), "Policy Condition failed"},
		"missing field":       {"b", with("x-amz-meta-tag", "\x00"), "Policy Condition failed"},
		"extra field":         {"b", with("x-amz-meta-other", "1"), "Extra input fields: x-amz-meta-other"},
		"extra success field": {"b", with("success_action_status", "201"), "Extra input fields"},
	} {
		_, _, err := checkPostPolicy(conds, tc.bucket, tc.fields)
		if !isCode(err, "AccessDenied") || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want AccessDenied with %q", name, err, tc.msg)
		}
	}
	if _, _, err := checkPostPolicy(conds, "b", with("content-type", "image/png, image/gif")); err != nil {
		t.Errorf("several image types: %v", err)
	}
	// Without a content-length-range, any size.
	if lo, hi, err := checkPostPolicy(nil, "b", map[string]string{"policy": "p"}); err != nil || lo != 0 || hi != -1 {
		t.Errorf("no conditions: %d %d %v", lo, hi, err)
	}
}

func TestPostRedirect(t *testing.T) {
	t.Parallel()
	got := postRedirect("https://app.example.com/done?x=1", "b", "k 1", "abc")
	u, err := url.Parse(got)
	if err != nil || u.Host != "app.example.com" || u.Query().Get("x") != "1" || u.Query().Get("key") != "k 1" || u.Query().Get("bucket") != "b" || u.Query().Get("etag") != `"abc"` {
		t.Errorf("redirect %q", got)
	}
	if got := postRedirect("not a url", "b", "k", "e"); got != "" {
		t.Errorf("bad URL: %q", got)
	}
	r := &http.Request{Method: "POST", Header: http.Header{"Content-Type": {"multipart/form-data; boundary=x"}}}
	if !isPostForm(r, "") || isPostForm(r, "key") {
		t.Error("isPostForm")
	}
	r.Header.Set("Content-Type", "application/xml")
	if isPostForm(r, "") {
		t.Error("isPostForm of an XML body")
	}
}
