package s3

import (
	"net/http"
	"reflect"
	"testing"
)

func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	age := 600
	rules := []corsRule{
		{AllowedOrigins: []string{"https://app.example.com", "http://*.example.org"}, AllowedMethods: []string{"GET", "PUT"}, AllowedHeaders: []string{"content-type", "x-amz-*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: &age},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET", "HEAD"}},
	}
	if err := checkCORSRules(rules); err != nil {
		t.Fatal(err)
	}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	tests := []struct {
		name  string
		h     http.Header
		rules []corsRule
		code  string
		st    int
		want  map[string]string // response headers
	}{
		{"no origin", hdr(), rules, "BadRequest", 400, nil},
		{"no method", hdr("Origin", "https://app.example.com"), rules, "BadRequest", 400, nil},
		{"method only", hdr("Access-Control-Request-Method", "GET"), rules, "BadRequest", 400, nil},
		{"no configuration", hdr("Origin", "https://x", "Access-Control-Request-Method", "GET"), nil, "AccessForbidden", 403, nil},
		{"exact origin", hdr("Origin", "https://app.example.com", "Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "Content-Type, X-Amz-Date"), rules, "", 200, map[string]string{
			"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Methods": "GET, PUT", "Access-Control-Allow-Headers": "content-type, x-amz-date",
			"Access-Control-Expose-Headers": "ETag", "Access-Control-Max-Age": "600", "Access-Control-Allow-Credentials": "true"}},
		{"wildcard origin", hdr("Origin", "http://a.b.example.org", "Access-Control-Request-Method", "GET"), rules, "", 200, map[string]string{"Access-Control-Allow-Origin": "http://a.b.example.org"}},
		{"header not allowed falls to the next rule, which allows none", hdr("Origin", "https://app.example.com", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "authorization"), rules, "AccessForbidden", 403, nil},
		{"any origin", hdr("Origin", "https://elsewhere", "Access-Control-Request-Method", "HEAD"), rules, "", 200, map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, HEAD", "Access-Control-Allow-Credentials": ""}},
		{"method not allowed", hdr("Origin", "https://elsewhere", "Access-Control-Request-Method", "DELETE"), rules, "AccessForbidden", 403, nil},
		{"scheme matters", hdr("Origin", "http://app.example.com", "Access-Control-Request-Method", "PUT"), rules, "AccessForbidden", 403, nil},
	}
	for _, tc := range tests {
		out := http.Header{}
		err := corsPreflight(tc.h, tc.rules, out)
		if tc.code != "" {
			if !isCode(err, tc.code) || err.(*APIError).Status != tc.st {
				t.Errorf("%s: %v, want %d %s", tc.name, err, tc.st, tc.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		for k, v := range tc.want {
			if got := out.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", tc.name, k, got, v)
			}
		}
	}
}

func TestCORSRules(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		rules []corsRule
		code  string
	}{
		"none":             {nil, "MalformedXML"},
		"no origin":        {[]corsRule{{AllowedMethods: []string{"GET"}}}, "MalformedXML"},
		"no method":        {[]corsRule{{AllowedOrigins: []string{"*"}}}, "MalformedXML"},
		"bad method":       {[]corsRule{{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"PATCH"}}}, "InvalidRequest"},
		"two wildcards":    {[]corsRule{{AllowedOrigins: []string{"*.*.com"}, AllowedMethods: []string{"GET"}}}, "InvalidRequest"},
		"header wildcards": {[]corsRule{{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}, AllowedHeaders: []string{"x-*-*"}}}, "InvalidRequest"},
		"good":             {[]corsRule{{AllowedOrigins: []string{" https://a.com "}, AllowedMethods: []string{" GET"}}}, ""},
	} {
		err := checkCORSRules(tc.rules)
		if tc.code == "" && err != nil || tc.code != "" && !isCode(err, tc.code) {
			t.Errorf("%s: %v, want %q", name, err, tc.code)
		}
	}
	many := make([]corsRule, 101)
	for i := range many {
		many[i] = corsRule{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}}
	}
	if err := checkCORSRules(many); !isCode(err, "MalformedXML") {
		t.Errorf("101 rules: %v", err)
	}
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "anything", true}, {"https://*.a.com", "https://x.a.com", true}, {"https://*.a.com", "https://a.com", false},
		{"a*a", "a", false}, {"a*a", "aa", true}, {"exact", "exact", true}, {"exact", "exactly", false},
	} {
		if got := wildcardMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("wildcardMatch(%q, %q) = %v", tc.pattern, tc.s, got)
		}
	}
	// Actual requests: the first rule allowing origin and method.
	rules := []corsRule{{AllowedOrigins: []string{"https://a.com"}, AllowedMethods: []string{"PUT"}}, {AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}}}
	if r := matchCORS(rules, "https://a.com", "GET", nil); r == nil || !reflect.DeepEqual(r.AllowedOrigins, []string{"*"}) {
		t.Errorf("GET from a.com matched %+v", r)
	}
	if r := matchCORS(rules, "https://b.com", "PUT", nil); r != nil {
		t.Errorf("PUT from b.com matched %+v", r)
	}
}
