package s3

import (
	"mime"
	"strings"
	"testing"
)

func TestParseRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		h       string
		size    int64
		start   int64
		length  int64
		partial bool
		invalid bool
	}{
		{"", 100, 0, 0, false, false},
		{"bytes=0-9", 100, 0, 10, true, false},
		{"bytes=10-", 100, 10, 90, true, false},
		{"bytes=-10", 100, 90, 10, true, false},
		{"bytes=-1000", 100, 0, 100, true, false},
		{"bytes=50-1000", 100, 50, 50, true, false},
		{"bytes=99-99", 100, 99, 1, true, false},
		{"bytes=100-", 100, 0, 0, false, true},
		{"bytes=100-200", 100, 0, 0, false, true},
		{"bytes=-0", 100, 0, 0, false, true},
		{"bytes=0-", 0, 0, 0, false, true},
		{"bytes=-5", 0, 0, 0, false, true},
		{"bytes=5-3", 100, 0, 0, false, false},     // invalid: ignored
		{"bytes=0-1,5-6", 100, 0, 0, false, false}, // several ranges: whole object
		{"items=0-1", 100, 0, 0, false, false},
		{"bytes=a-b", 100, 0, 0, false, false},
		{"bytes=-", 100, 0, 0, false, false},
		{"bytes=+1-2", 100, 0, 0, false, false},
		{"bytes= 1 - 2 ", 100, 1, 2, true, false},
	}
	for _, tc := range tests {
		r, ok, err := parseRange(tc.h, tc.size)
		if tc.invalid {
			if !isCode(err, "InvalidRange") {
				t.Errorf("parseRange(%q, %d): err %v, want InvalidRange", tc.h, tc.size, err)
			}
			continue
		}
		if err != nil || ok != tc.partial || (ok && (r.Start != tc.start || r.Length != tc.length)) {
			t.Errorf("parseRange(%q, %d) = %+v %v %v, want %d+%d %v", tc.h, tc.size, r, ok, err, tc.start, tc.length, tc.partial)
		}
	}
}

func TestParseCopyRange(t *testing.T) {
	t.Parallel()
	if r, err := parseCopyRange("bytes=5-9", 10); err != nil || r.Start != 5 || r.Length != 5 {
		t.Fatalf("got %+v %v", r, err)
	}
	for _, h := range []string{"bytes=5-", "bytes=-5", "5-9", "bytes=9-5"} {
		if _, err := parseCopyRange(h, 10); !isCode(err, "InvalidArgument") {
			t.Errorf("%q: %v", h, err)
		}
	}
	if _, err := parseCopyRange("bytes=5-10", 10); !isCode(err, "InvalidRange") {
		t.Errorf("out of range: %v", err)
	}
}

func TestObjectPath(t *testing.T) {
	t.Parallel()
	ok := []struct{ key, path string }{
		{"a", "/b/a"},
		{"a/b/c.txt", "/b/a/b/c.txt"},
		{"dir/", "/b/dir"},
		{"with space+plus%percent", "/b/with space+plus%percent"},
		{"üñíçødé/日本", "/b/üñíçødé/日本"},
		{"..a/b..", "/b/..a/b.."},
		{".hidden", "/b/.hidden"},
		{"x/.sluice-s3", "/b/x/.sluice-s3"},
		{strings.Repeat("k/", 511) + "k", "/b/" + strings.Repeat("k/", 511) + "k"},
	}
	for _, tc := range ok {
		p, _, err := objectPath("b", tc.key)
		if err != nil || p != tc.path {
			t.Errorf("objectPath(%q) = %q, %v; want %q", tc.key, p, err, tc.path)
		}
	}
	bad := map[string]string{
		"":                              "XSluiceInvalidObjectName",
		"/a":                            "XSluiceInvalidObjectName",
		"a//b":                          "XSluiceInvalidObjectName",
		"../x":                          "XSluiceInvalidObjectName",
		"a/../../x":                     "XSluiceInvalidObjectName",
		"a/./b":                         "XSluiceInvalidObjectName",
		".":                             "XSluiceInvalidObjectName",
		"a/\x00b":                       "XSluiceInvalidObjectName",
		"\xff\xfe":                      "XSluiceInvalidObjectName",
		".sluice-s3/tmp/x":              "XSluiceInvalidObjectName",
		".sluice-s3/":                   "XSluiceInvalidObjectName",
		"//":                            "XSluiceInvalidObjectName",
		strings.Repeat("k", 1025):       "KeyTooLongError",
		strings.Repeat("k", 256):        "KeyTooLongError",
		"a/" + strings.Repeat("k", 300): "KeyTooLongError",
	}
	for key, code := range bad {
		if _, _, err := objectPath("b", key); !isCode(err, code) {
			t.Errorf("objectPath(%q): %v, want %s", truncate(key, 30), err, code)
		}
	}
}

func TestValidBucketName(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"abc", "my-bucket", "my.bucket.1", "a1b", strings.Repeat("a", 63)} {
		if !validBucketName(b) {
			t.Errorf("%q should be valid", b)
		}
	}
	for _, b := range []string{"ab", "ABC", "-abc", "abc-", "a..b", "a.-b", "192.168.1.1", "a_b", strings.Repeat("a", 64), ".sluice-s3", "a b"} {
		if validBucketName(b) {
			t.Errorf("%q should be invalid", b)
		}
	}
}

func TestConditions(t *testing.T) {
	t.Parallel()
	// checkConditions is exercised end to end in test/s3; here the
	// precedence rules.
	mt := exampleTime
	before, after := "Thu, 23 May 2013 00:00:00 GMT", "Sat, 25 May 2013 00:00:00 GMT"
	tests := []struct {
		h    map[string]string
		code string
	}{
		{map[string]string{"If-Match": `"abc"`}, ""},
		{map[string]string{"If-Match": `"x", "abc"`}, ""},
		{map[string]string{"If-Match": `*`}, ""},
		{map[string]string{"If-Match": `"x"`}, "PreconditionFailed"},
		{map[string]string{"If-Match": `"abc"`, "If-Unmodified-Since": before}, ""}, // If-Match wins
		{map[string]string{"If-Unmodified-Since": before}, "PreconditionFailed"},
		{map[string]string{"If-Unmodified-Since": after}, ""},
		{map[string]string{"If-None-Match": `"abc"`}, "NotModified"},
		{map[string]string{"If-None-Match": `"x"`}, ""},
		{map[string]string{"If-None-Match": `"abc"`, "If-Modified-Since": before}, "NotModified"},
		{map[string]string{"If-None-Match": `"x"`, "If-Modified-Since": after}, ""}, // If-None-Match wins
		{map[string]string{"If-Modified-Since": after}, "NotModified"},
		{map[string]string{"If-Modified-Since": before}, ""},
		{map[string]string{"If-Modified-Since": "garbage"}, ""},
	}
	for _, tc := range tests {
		h := make(map[string][]string)
		for k, v := range tc.h {
			h[k] = []string{v}
		}
		err := checkConditions(h, "", "abc", mt)
		if (tc.code == "" && err != nil) || (tc.code != "" && !isCode(err, tc.code)) {
			t.Errorf("%v: %v, want %q", tc.h, err, tc.code)
		}
	}
}

func TestDecodeXML(t *testing.T) {
	t.Parallel()
	var d deleteRequest
	if _, err := decodeXML(strings.NewReader(`<Delete><Quiet>true</Quiet><Object><Key>a</Key></Object><Object><Key>b&amp;c</Key></Object></Delete>`), &d, false); err != nil {
		t.Fatal(err)
	}
	if !d.Quiet || len(d.Objects) != 2 || d.Objects[1].Key != "b&c" {
		t.Fatalf("decoded %+v", d)
	}
	for _, body := range []string{"", "<Delete>", "<Delete><Object></Delete>", "<Other/>", "not xml", "<Delete><Quiet>maybe</Quiet></Delete>"} {
		var d deleteRequest
		if _, err := decodeXML(strings.NewReader(body), &d, false); !isCode(err, "MalformedXML") {
			t.Errorf("decodeXML(%q): %v, want MalformedXML", body, err)
		}
	}
	var c createBucketRequest
	if empty, err := decodeXML(strings.NewReader("  "), &c, true); err != nil || !empty {
		t.Fatalf("empty optional body: %v %v", empty, err)
	}
	big := "<Delete>" + strings.Repeat(" ", maxXMLBody) + "</Delete>"
	if _, err := decodeXML(strings.NewReader(big), &d, false); !isCode(err, "MaxMessageLengthExceeded") {
		t.Fatalf("big body: %v", err)
	}
}

func TestCredentialsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Generated on first use, then read back.
	creds, where, gen, err := LoadCredentials(CredentialOptions{DataDir: dir, Getenv: func(string) string { return "" }})
	if err != nil || !gen || len(creds) != 1 || !strings.HasSuffix(where, CredentialsFileName) {
		t.Fatalf("generate: %v %v %q %v", creds, gen, where, err)
	}
	again, _, gen2, err := LoadCredentials(CredentialOptions{DataDir: dir, Getenv: func(string) string { return "" }})
	if err != nil || gen2 || len(again) != 1 {
		t.Fatalf("reload: %v %v %v", again, gen2, err)
	}
	for ak, sk := range creds {
		if again[ak] != sk || len(ak) != 20 || len(sk) != 40 {
			t.Fatalf("reloaded %v, generated %v", again, creds)
		}
	}
	// Flags beat the environment, which beats the data dir.
	env := func(k string) string {
		return map[string]string{EnvAccessKey: "ENVKEY1", EnvSecretKey: "envsecret1"}[k]
	}
	c, where, _, err := LoadCredentials(CredentialOptions{DataDir: dir, Getenv: env})
	if err != nil || c["ENVKEY1"] != "envsecret1" || where != "environment" {
		t.Fatalf("env: %v %q %v", c, where, err)
	}
	c, where, _, err = LoadCredentials(CredentialOptions{AccessKey: "FLAGKEY", SecretKey: "flagsecret", Getenv: env})
	if err != nil || c["FLAGKEY"] != "flagsecret" || where != "flags" {
		t.Fatalf("flags: %v %q %v", c, where, err)
	}
	if _, _, _, err := LoadCredentials(CredentialOptions{AccessKey: "FLAGKEY", Getenv: env}); err == nil {
		t.Fatal("an access key without a secret was accepted")
	}
	if _, _, _, err := LoadCredentials(CredentialOptions{Getenv: func(string) string { return "" }}); err == nil {
		t.Fatal("no credentials and no data dir: no error")
	}
}

func TestListEncode(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"a b":       "a%20b",
		"pl+us":     "pl%2Bus",
		"d/e f/":    "d/e%20f/",
		"per%cent":  "per%25cent",
		"ü":         "%C3%BC",
		"a-b_c.d~e": "a-b_c.d~e",
		"q?x#y&z=w": "q%3Fx%23y%26z%3Dw",
	}
	for in, want := range tests {
		if got := listEncode(in); got != want {
			t.Errorf("listEncode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWritePreconditions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		h         map[string]string
		exists    bool
		noReplace bool
		code      string
	}{
		{nil, true, false, ""},
		{map[string]string{"If-None-Match": "*"}, false, true, ""},
		{map[string]string{"If-None-Match": " * "}, false, true, ""},
		{map[string]string{"If-None-Match": "*"}, true, false, "PreconditionFailed"},
		{map[string]string{"If-None-Match": `"abc"`}, true, false, "PreconditionFailed"},
		{map[string]string{"If-None-Match": `"x", "abc"`}, true, false, "PreconditionFailed"},
		{map[string]string{"If-None-Match": `"x"`}, true, false, ""},
		{map[string]string{"If-None-Match": `"abc"`}, false, false, ""},
		{map[string]string{"If-Match": `"abc"`}, true, false, ""},
		{map[string]string{"If-Match": `*`}, true, false, ""},
		{map[string]string{"If-Match": `"x"`}, true, false, "PreconditionFailed"},
		{map[string]string{"If-Match": `"abc"`}, false, false, "NoSuchKey"},
		{map[string]string{"If-Match": `"abc"`, "If-None-Match": `"x"`}, true, false, ""},
		{map[string]string{"If-Match": `"abc"`, "If-None-Match": `"abc"`}, true, false, "PreconditionFailed"},
	}
	for _, tc := range tests {
		h := make(map[string][]string)
		for k, v := range tc.h {
			h[k] = []string{v}
		}
		etag := ""
		if tc.exists {
			etag = "abc"
		}
		nr, err := writePreconditions(h, tc.exists, etag)
		if (tc.code == "" && err != nil) || (tc.code != "" && !isCode(err, tc.code)) || nr != tc.noReplace {
			t.Errorf("%v exists=%v: %v %v, want %q noReplace=%v", tc.h, tc.exists, nr, err, tc.code, tc.noReplace)
		}
	}
}

func TestParseDateHeader(t *testing.T) {
	t.Parallel()
	want := exampleTime
	for _, d := range []string{"Fri, 24 May 2013 00:00:00 GMT", "Fri, 24 May 2013 00:00:00 -0000", "Fri, 24 May 2013 02:00:00 +0200",
		"Friday, 24-May-13 00:00:00 GMT", "Fri May 24 00:00:00 2013", "20130524T000000Z", " Fri, 24 May 2013 00:00:00 GMT "} {
		if got, err := parseDateHeader(d); err != nil || !got.Equal(want) {
			t.Errorf("parseDateHeader(%q) = %v, %v", d, got, err)
		}
	}
	for _, d := range []string{"", "yesterday", "2013-05-24"} {
		if _, err := parseDateHeader(d); err == nil {
			t.Errorf("parseDateHeader(%q): no error", d)
		}
	}
}

func TestHeaderValues(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                          "",
		"gzip":                      "gzip",
		"gzip, br":                  "gzip, br",
		"aws-chunked":               "",
		"aws-chunked, gzip":         "gzip",
		"gzip, aws-chunked, br":     "gzip, br",
		"gzip,AWS-CHUNKED":          "gzip",
		"br,  gzip":                 "br,  gzip",
		" aws-chunked ,  identity ": "identity",
	} {
		if got := stripAWSChunked(in); got != want {
			t.Errorf("stripAWSChunked(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"plain":         "plain",
		"wüh":           "wüh",
		"caf\xe9":       "café", // ISO-8859-1
		"=?UTF-8?B??=":  "=?UTF-8?B??=",
		"\xff\xfe text": "ÿþ text",
	} {
		if got := metaValueIn(in); got != want {
			t.Errorf("metaValueIn(%q) = %q, want %q", in, got, want)
		}
	}
	if got := metaValueOut("ascii only =?x?="); got != "ascii only =?x?=" {
		t.Errorf("ASCII value changed: %q", got)
	}
	out := metaValueOut("wüh 日本")
	if !strings.HasPrefix(out, "=?UTF-8?b?") {
		t.Fatalf("metaValueOut: %q", out)
	}
	if back, err := new(mime.WordDecoder).DecodeHeader(out); err != nil || back != "wüh 日本" {
		t.Errorf("decoded %q, %v", back, err)
	}
}
