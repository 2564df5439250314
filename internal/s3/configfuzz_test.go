package s3

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"
)

// FuzzBucketConfigs decodes the bucket configuration documents (lifecycle,
// CORS, tagging, versioning) and checks that what is accepted survives the
// round trip through its stored (JSON) form.
func FuzzBucketConfigs(f *testing.F) {
	f.Add([]byte(`<LifecycleConfiguration><Rule><ID>a</ID><Filter><And><Prefix>p/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter><Status>Enabled</Status><Expiration><Days>3</Days></Expiration><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule></LifecycleConfiguration>`))
	f.Add([]byte(`<LifecycleConfiguration><Rule><Prefix></Prefix><Status>Enabled</Status><Expiration><Date>2024-01-01T00:00:00Z</Date></Expiration><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule></LifecycleConfiguration>`))
	f.Add([]byte(`<LifecycleConfiguration><Rule><Filter/><Status>Enabled</Status><Transition><Days>0</Days><StorageClass>GLACIER</StorageClass></Transition><NoncurrentVersionTransition><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>1</NewerNoncurrentVersions><StorageClass>DEEP_ARCHIVE</StorageClass></NoncurrentVersionTransition></Rule></LifecycleConfiguration>`))
	f.Add([]byte(`<CORSConfiguration><CORSRule><AllowedOrigin>https://*.a.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>*</AllowedHeader><MaxAgeSeconds>5</MaxAgeSeconds></CORSRule></CORSConfiguration>`))
	f.Add([]byte(`<Tagging><TagSet><Tag><Key>a</Key><Value>b</Value></Tag></TagSet></Tagging>`))
	f.Add([]byte(`<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var lc lifecycleConfiguration
		if _, err := decodeXML(bytes.NewReader(data), &lc, false); err == nil {
			if rules, err := compileLifecycle(&lc); err == nil {
				b, err := json.Marshal(&lc)
				if err != nil {
					t.Fatal(err)
				}
				var back lifecycleConfiguration
				if err := json.Unmarshal(b, &back); err != nil {
					t.Fatal(err)
				}
				again, err := compileLifecycle(&back)
				if err != nil || len(again) != len(rules) {
					t.Fatalf("stored lifecycle rules do not compile again: %v", err)
				}
				lifecycleActions(rules, "k", []lcVersion{{vid: "a", latest: true, hsm: "resident"}, {vid: "c", class: "GLACIER"}, {vid: "d", hsm: "released"}, {vid: "b", marker: true}}, time.Unix(1e9, 0), time.Hour)
			}
		}
		var cors corsConfiguration
		if _, err := decodeXML(bytes.NewReader(data), &cors, false); err == nil {
			if err := checkCORSRules(cors.Rules); err == nil {
				b, _ := json.Marshal(cors.Rules)
				var back []corsRule
				if err := json.Unmarshal(b, &back); err != nil || checkCORSRules(back) != nil {
					t.Fatalf("stored CORS rules do not check again: %v", err)
				}
				matchCORS(back, "https://x.a.com", "GET", []string{"x-amz-date"})
			}
		}
		var tg tagging
		if _, err := decodeXML(bytes.NewReader(data), &tg, false); err == nil {
			pairs := make([][2]string, len(tg.TagSet.Tags))
			for i, x := range tg.TagSet.Tags {
				pairs[i] = [2]string{x.Key, x.Value}
			}
			checkTags(pairs, maxBucketTags, true)
		}
		parseTaggingHeader(string(data))
	})
}

// FuzzPostPolicy parses POST policies (untrusted: a browser form's) and
// checks a form against what it accepts.
func FuzzPostPolicy(f *testing.F) {
	f.Add([]byte(`{"expiration": "2030-01-01T00:00:00Z", "conditions": [{"bucket": "b"}, ["starts-with", "$key", "u/"], ["content-length-range", 1, 10], ["eq", "$acl", "private"]]}`))
	f.Add([]byte(`{"expiration": "2000-01-01T00:00:00Z", "conditions": []}`))
	f.Add([]byte(`{"conditions": [["content-length-range", "1", "x"]]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		conds, err := parsePostPolicy(base64.StdEncoding.EncodeToString(doc), time.Unix(1.5e9, 0))
		if err != nil {
			return
		}
		lo, hi, err := checkPostPolicy(conds, "b", map[string]string{"key": "u/x", "acl": "private", "policy": "p"})
		if err == nil && hi >= 0 && lo > hi {
			t.Fatalf("size range %d..%d", lo, hi)
		}
	})
}
