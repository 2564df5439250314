package s3

import (
	"encoding/xml"
	"reflect"
	"strings"
	"testing"
	"time"
)

func lifecycleDoc(t *testing.T, rules string) *lifecycleConfiguration {
	t.Helper()
	var cfg lifecycleConfiguration
	if _, err := decodeXML(strings.NewReader(`<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`+rules+`</LifecycleConfiguration>`), &cfg, false); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

func TestCompileLifecycle(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		rules string
		code  string
	}{
		"days":                  {`<Rule><ID>a</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>30</Days></Expiration></Rule>`, ""},
		"old prefix":            {`<Rule><Prefix>logs/</Prefix><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, ""},
		"date":                  {`<Rule><Filter/><Status>Enabled</Status><Expiration><Date>2024-01-01T00:00:00.000Z</Date></Expiration></Rule>`, ""},
		"noncurrent":            {`<Rule><Filter/><Status>Disabled</Status><NoncurrentVersionExpiration><NoncurrentDays>7</NoncurrentDays><NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>`, ""},
		"and":                   {`<Rule><Filter><And><Prefix>p/</Prefix><Tag><Key>a</Key><Value>1</Value></Tag><Tag><Key>b</Key><Value>2</Value></Tag><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan></And></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, ""},
		"abort":                 {`<Rule><Filter><Prefix>x</Prefix></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>3</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`, ""},
		"transition":            {`<Rule><Filter/><Status>Enabled</Status><Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition></Rule>`, "NotImplemented"},
		"noncurrent transition": {`<Rule><Filter/><Status>Enabled</Status><NoncurrentVersionTransition><NoncurrentDays>3</NoncurrentDays><StorageClass>GLACIER</StorageClass></NoncurrentVersionTransition></Rule>`, "NotImplemented"},
		"no action":             {`<Rule><Filter/><Status>Enabled</Status></Rule>`, "InvalidRequest"},
		"bad status":            {`<Rule><Filter/><Status>On</Status><Expiration><Days>1</Days></Expiration></Rule>`, "MalformedXML"},
		"zero days":             {`<Rule><Filter/><Status>Enabled</Status><Expiration><Days>0</Days></Expiration></Rule>`, "InvalidArgument"},
		"days and date":         {`<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days><Date>2024-01-01T00:00:00Z</Date></Expiration></Rule>`, "MalformedXML"},
		"date not midnight":     {`<Rule><Filter/><Status>Enabled</Status><Expiration><Date>2024-01-01T10:00:00Z</Date></Expiration></Rule>`, "InvalidArgument"},
		"prefix and filter":     {`<Rule><Prefix>a</Prefix><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, "MalformedXML"},
		"two filters":           {`<Rule><Filter><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, "MalformedXML"},
		"marker with tag":       {`<Rule><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`, "InvalidArgument"},
		"abort with tag":        {`<Rule><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`, "InvalidRequest"},
		"duplicate IDs":         {`<Rule><ID>a</ID><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule><Rule><ID>a</ID><Filter/><Status>Enabled</Status><Expiration><Days>2</Days></Expiration></Rule>`, "InvalidArgument"},
		"noncurrent no days":    {`<Rule><Filter/><Status>Enabled</Status><NoncurrentVersionExpiration><NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>`, "InvalidArgument"},
		"sizes inverted":        {`<Rule><Filter><And><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan><ObjectSizeLessThan>5</ObjectSizeLessThan></And></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, "InvalidArgument"},
	} {
		_, err := compileLifecycle(lifecycleDoc(t, tc.rules))
		if tc.code == "" && err != nil || tc.code != "" && !isCode(err, tc.code) {
			t.Errorf("%s: %v, want %q", name, err, tc.code)
		}
	}
	if _, err := compileLifecycle(&lifecycleConfiguration{}); !isCode(err, "MalformedXML") {
		t.Errorf("no rules: %v", err)
	}
	// The document goes back as it came.
	cfg := lifecycleDoc(t, `<Rule><ID>a</ID><Filter><And><Prefix>p/</Prefix><Tag><Key>a</Key><Value>1</Value></Tag></And></Filter><Status>Enabled</Status><Expiration><Days>3</Days></Expiration><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>`)
	b, _ := xml.Marshal(cfg)
	if want := `<Rule><ID>a</ID><Filter><And><Prefix>p/</Prefix><Tag><Key>a</Key><Value>1</Value></Tag></And></Filter><Status>Enabled</Status><Expiration><Days>3</Days></Expiration><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>`; !strings.Contains(string(b), want) {
		t.Errorf("marshalled %s\nwant %s", b, want)
	}
}

func TestLcDue(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	start := time.Date(2024, 3, 1, 15, 30, 0, 0, time.UTC)
	if got, want := lcDue(start, 1, day), time.Date(2024, 3, 3, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("1 day after %v: %v, want the next midnight after a day, %v", start, got, want)
	}
	midnight := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	if got := lcDue(midnight, 2, day); !got.Equal(midnight.Add(2 * day)) {
		t.Errorf("from midnight: %v", got)
	}
	if got := lcDue(time.Unix(5, 0), 1, 2*time.Second); !got.Equal(time.Unix(8, 0)) {
		t.Errorf("short days: %v", got)
	}
}

func TestLifecycleActions(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	t0 := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d float64) time.Time { return t0.Add(time.Duration(d * float64(day))) }
	compile := func(rules string) []lcRule {
		r, err := compileLifecycle(lifecycleDoc(t, rules))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	expire := compile(`<Rule><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>2</Days></Expiration></Rule>`)
	tagged := compile(`<Rule><Filter><And><Prefix>d/</Prefix><Tag><Key>tmp</Key><Value>yes</Value></Tag><ObjectSizeGreaterThan>100</ObjectSizeGreaterThan></And></Filter><Status>Enabled</Status><Expiration><Date>2024-02-01T00:00:00Z</Date></Expiration></Rule>`)
	noncurrent := compile(`<Rule><Filter/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>1</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>`)
	markers := compile(`<Rule><Filter/><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`)
	disabled := compile(`<Rule><Filter/><Status>Disabled</Status><Expiration><Days>1</Days></Expiration></Rule>`)
	obj := func(vid string, latest bool, made time.Time) lcVersion {
		return lcVersion{vid: vid, latest: latest, size: 1000, mtime: made}
	}
	for _, tc := range []struct {
		name     string
		rules    []lcRule
		key      string
		versions []lcVersion
		now      time.Time
		want     []lcAction
	}{
		{"not yet", expire, "logs/a", []lcVersion{obj("null", true, t0)}, at(2.4), nil},
		{"due at the midnight after two days", expire, "logs/a", []lcVersion{obj("null", true, t0)}, at(2.5), []lcAction{{vid: "null", current: true}}},
		{"other prefix", expire, "data/a", []lcVersion{obj("null", true, t0)}, at(30), nil},
		{"disabled", disabled, "a", []lcVersion{obj("null", true, t0)}, at(30), nil},
		{"a delete marker does not expire", expire, "logs/a", []lcVersion{{vid: "m", latest: true, marker: true, mtime: t0}, obj("v1", false, t0)}, at(30), nil},
		{"date, tags and size", tagged, "d/x", []lcVersion{{vid: "v", latest: true, size: 101, mtime: t0, tags: map[string]string{"tmp": "yes", "o": "1"}}}, time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC), []lcAction{{vid: "v", current: true}}},
		{"before the date", tagged, "d/x", []lcVersion{{vid: "v", latest: true, size: 101, mtime: t0, tags: map[string]string{"tmp": "yes"}}}, time.Date(2024, 1, 31, 23, 0, 0, 0, time.UTC), nil},
		{"tag differs", tagged, "d/x", []lcVersion{{vid: "v", latest: true, size: 101, mtime: t0, tags: map[string]string{"tmp": "no"}}}, at(100), nil},
		{"too small", tagged, "d/x", []lcVersion{{vid: "v", latest: true, size: 100, mtime: t0, tags: map[string]string{"tmp": "yes"}}}, at(100), nil},
		// v4 current, v3 noncurrent since v4 (day 3), v2 since day 2, v1 since day 1.
		{"noncurrent: keep the newest one, expire the rest after a day", noncurrent, "k", []lcVersion{obj("v4", true, at(3)), obj("v3", false, at(2)), obj("v2", false, at(1)), obj("v1", false, at(0))}, at(3.6),
			[]lcAction{{vid: "v2"}, {vid: "v1"}}},
		{"noncurrent: not a day yet", noncurrent, "k", []lcVersion{obj("v4", true, at(3)), obj("v3", false, at(2)), obj("v2", false, at(2.9))}, at(3.2), nil},
		{"noncurrent under a delete marker", noncurrent, "k", []lcVersion{{vid: "m", latest: true, marker: true, mtime: at(5)}, obj("v2", false, at(1)), obj("v1", false, at(0))}, at(10),
			[]lcAction{{vid: "v1"}}},
		{"expired delete marker", markers, "k", []lcVersion{{vid: "m", latest: true, marker: true, mtime: t0}}, t0, []lcAction{{vid: "m"}}},
		{"delete marker with versions stays", markers, "k", []lcVersion{{vid: "m", latest: true, marker: true, mtime: t0}, obj("v1", false, t0)}, at(100), nil},
	} {
		got := lifecycleActions(tc.rules, tc.key, tc.versions, tc.now, day)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	abort := compile(`<Rule><Filter><Prefix>up/</Prefix></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`)
	if abortsUpload(abort, "up/a", t0, at(1.4), day) || !abortsUpload(abort, "up/a", t0, at(1.5), day) || abortsUpload(abort, "other", t0, at(9), day) {
		t.Error("abortsUpload decides wrongly")
	}
	if p := sweepPrefix(append(append([]lcRule{}, expire...), compile(`<Rule><Filter><Prefix>logs2/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>2</Days></Expiration></Rule>`)...)); p != "logs" {
		t.Errorf("sweepPrefix: %q", p)
	}
	if p := sweepPrefix(append(append([]lcRule{}, expire...), noncurrent...)); p != "" {
		t.Errorf("sweepPrefix with a rule for every key: %q", p)
	}
}
