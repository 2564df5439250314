package s3

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
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
		"transition":            {`<Rule><Filter/><Status>Enabled</Status><Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition></Rule>`, ""},
		"noncurrent transition": {`<Rule><Filter/><Status>Enabled</Status><NoncurrentVersionTransition><NoncurrentDays>3</NoncurrentDays><StorageClass>GLACIER</StorageClass></NoncurrentVersionTransition></Rule>`, ""},
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

// rule wraps lifecycle actions in an enabled rule for every key.
func rule(actions string) string {
	return `<Rule><Filter/><Status>Enabled</Status>` + actions + `</Rule>`
}

func transition(days, class string) string {
	return `<Transition><Days>` + days + `</Days><StorageClass>` + class + `</StorageClass></Transition>`
}

func ncTransition(days, class string) string {
	return `<NoncurrentVersionTransition><NoncurrentDays>` + days + `</NoncurrentDays><StorageClass>` + class + `</StorageClass></NoncurrentVersionTransition>`
}

func TestCompileTransitions(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		rules string
		code  string
	}{
		"days 0":                       {rule(transition("0", "GLACIER")), ""},
		"every class":                  {rule(transition("30", "STANDARD_IA") + transition("31", "ONEZONE_IA") + transition("40", "GLACIER_IR") + transition("50", "GLACIER") + transition("60", "DEEP_ARCHIVE") + transition("1", "INTELLIGENT_TIERING")), ""},
		"date":                         {rule(`<Transition><Date>2024-01-01T00:00:00Z</Date><StorageClass>GLACIER</StorageClass></Transition>`), ""},
		"with expiration":              {rule(transition("10", "GLACIER") + `<Expiration><Days>11</Days></Expiration>`), ""},
		"days and date":                {rule(`<Transition><Days>1</Days><Date>2024-01-01T00:00:00Z</Date><StorageClass>GLACIER</StorageClass></Transition>`), "MalformedXML"},
		"neither days nor date":        {rule(`<Transition><StorageClass>GLACIER</StorageClass></Transition>`), "MalformedXML"},
		"negative days":                {rule(transition("-1", "GLACIER")), "InvalidArgument"},
		"date not midnight":            {rule(`<Transition><Date>2024-01-01T01:00:00Z</Date><StorageClass>GLACIER</StorageClass></Transition>`), "InvalidArgument"},
		"no class":                     {rule(`<Transition><Days>1</Days></Transition>`), "MalformedXML"},
		"unknown class":                {rule(transition("1", "COLD")), "InvalidStorageClass"},
		"to STANDARD":                  {rule(transition("1", "STANDARD")), "InvalidStorageClass"},
		"same class twice":             {rule(transition("1", "GLACIER") + transition("2", "GLACIER")), "InvalidArgument"},
		"STANDARD_IA before 30 days":   {rule(transition("29", "STANDARD_IA")), "InvalidArgument"},
		"ONEZONE_IA before 30 days":    {rule(ncTransition("7", "ONEZONE_IA")), "InvalidArgument"},
		"mixed days and dates":         {rule(transition("1", "GLACIER") + `<Transition><Date>2024-01-01T00:00:00Z</Date><StorageClass>DEEP_ARCHIVE</StorageClass></Transition>`), "InvalidArgument"},
		"expiration before transition": {rule(transition("10", "GLACIER") + `<Expiration><Days>10</Days></Expiration>`), "InvalidArgument"},
		"expiration date, days":        {rule(transition("10", "GLACIER") + `<Expiration><Date>2030-01-01T00:00:00Z</Date></Expiration>`), "InvalidArgument"},
		"expiration date not later":    {rule(`<Transition><Date>2030-01-01T00:00:00Z</Date><StorageClass>GLACIER</StorageClass></Transition><Expiration><Date>2030-01-01T00:00:00Z</Date></Expiration>`), "InvalidArgument"},
		"noncurrent days 0, newer":     {rule(`<NoncurrentVersionTransition><NoncurrentDays>0</NoncurrentDays><NewerNoncurrentVersions>3</NewerNoncurrentVersions><StorageClass>GLACIER</StorageClass></NoncurrentVersionTransition>`), ""},
		"noncurrent without days":      {rule(`<NoncurrentVersionTransition><StorageClass>GLACIER</StorageClass></NoncurrentVersionTransition>`), "InvalidArgument"},
		"noncurrent newer 0":           {rule(`<NoncurrentVersionTransition><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>0</NewerNoncurrentVersions><StorageClass>GLACIER</StorageClass></NoncurrentVersionTransition>`), "InvalidArgument"},
		"noncurrent same class twice":  {rule(ncTransition("1", "GLACIER") + ncTransition("5", "GLACIER")), "InvalidArgument"},
		"noncurrent expiration first":  {rule(ncTransition("5", "GLACIER") + `<NoncurrentVersionExpiration><NoncurrentDays>5</NoncurrentDays></NoncurrentVersionExpiration>`), "InvalidArgument"},
		"noncurrent bad class":         {rule(ncTransition("1", "REDUCED_REDUNDANCY")), "InvalidStorageClass"},
	} {
		_, err := compileLifecycle(lifecycleDoc(t, tc.rules))
		if tc.code == "" && err != nil || tc.code != "" && !isCode(err, tc.code) {
			t.Errorf("%s: %v, want %q", name, err, tc.code)
		}
	}
	// Stored as JSON and returned as sent, Days 0 included.
	in := transition("0", "GLACIER") + `<NoncurrentVersionTransition><NoncurrentDays>2</NoncurrentDays><NewerNoncurrentVersions>1</NewerNoncurrentVersions><StorageClass>DEEP_ARCHIVE</StorageClass></NoncurrentVersionTransition>`
	stored, err := json.Marshal(lifecycleDoc(t, rule(in)))
	if err != nil {
		t.Fatal(err)
	}
	var back lifecycleConfiguration
	if err := json.Unmarshal(stored, &back); err != nil {
		t.Fatal(err)
	}
	if b, _ := xml.Marshal(&back); !strings.Contains(string(b), in) {
		t.Errorf("stored %s, returned %s\nwant %s", stored, b, in)
	}
}

func TestPickTransitionTier(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		configured string
		registered []string
		want       string // "" : refused
	}{
		{"", []string{"cold"}, "cold"},
		{"", nil, ""},
		{"", []string{"a", "b"}, ""},
		{"b", []string{"a", "b"}, "b"},
		{"c", []string{"a", "b"}, ""},
		{"a", nil, ""},
	} {
		got, err := pickTransitionTier(tc.configured, tc.registered)
		if got != tc.want || (err == nil) != (tc.want != "") || err != nil && !errors.Is(err, errNoTransitionTier) {
			t.Errorf("configured %q, registered %v: %q, %v; want %q", tc.configured, tc.registered, got, err, tc.want)
		}
	}
}

func TestLifecycleTransitions(t *testing.T) {
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
	cold := compile(`<Rule><Filter><Prefix>cold/</Prefix></Filter><Status>Enabled</Status>` + transition("2", "GLACIER") + `</Rule>`)
	steps := compile(rule(transition("1", "INTELLIGENT_TIERING") + transition("3", "GLACIER")))
	conflict := compile(rule(transition("2", "DEEP_ARCHIVE")) + rule(transition("1", "GLACIER")))
	expires := compile(rule(transition("2", "GLACIER") + `<Expiration><Days>5</Days></Expiration>`))
	dated := compile(rule(`<Transition><Date>2024-02-01T00:00:00Z</Date><StorageClass>GLACIER_IR</StorageClass></Transition>`))
	noncurrent := compile(rule(`<NoncurrentVersionTransition><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>1</NewerNoncurrentVersions><StorageClass>GLACIER</StorageClass></NoncurrentVersionTransition>`))
	ncExpires := compile(rule(ncTransition("1", "GLACIER") + `<NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays></NoncurrentVersionExpiration>`))
	disabled := compile(`<Rule><Filter/><Status>Disabled</Status>` + transition("0", "GLACIER") + `</Rule>`)
	big := compile(`<Rule><Filter><ObjectSizeGreaterThan>1000</ObjectSizeGreaterThan></Filter><Status>Enabled</Status>` + transition("0", "GLACIER") + `</Rule>`)
	ver := func(vid string, latest bool, made time.Time, class, hsm string) lcVersion {
		return lcVersion{vid: vid, latest: latest, size: 1000, mtime: made, class: class, hsm: hsm}
	}
	cur := func(class, hsm string) []lcVersion { return []lcVersion{ver("null", true, t0, class, hsm)} }
	move := func(vid, class string) lcAction { return lcAction{vid: vid, class: class, move: true} }
	label := func(vid, class string) lcAction { return lcAction{vid: vid, class: class} }
	for _, tc := range []struct {
		name     string
		rules    []lcRule
		key      string
		versions []lcVersion
		now      time.Time
		want     []lcAction
	}{
		{"not yet", cold, "cold/a", cur("", "resident"), at(2.4), nil},
		{"due: a resident object moves", cold, "cold/a", cur("", "resident"), at(2.5), []lcAction{move("null", "GLACIER")}},
		{"a changed one moves again", cold, "cold/a", cur("", "dirty"), at(9), []lcAction{move("null", "GLACIER")}},
		{"released already: the class only", cold, "cold/a", cur("", "released"), at(9), []lcAction{label("null", "GLACIER")}},
		{"archived by hand: left on the targets", cold, "cold/a", cur("", "archived"), at(9), nil},
		{"in the class already", cold, "cold/a", cur("GLACIER", ""), at(9), nil},
		{"state unknown: nothing", cold, "cold/a", cur("", ""), at(9), nil},
		{"other prefix", cold, "hot/a", cur("", "resident"), at(9), nil},
		{"disabled", disabled, "a", cur("", "resident"), at(9), nil},
		{"too small for the filter", big, "a", cur("", "resident"), at(9), nil},
		{"first step", steps, "a", cur("", "resident"), at(2), []lcAction{move("null", "INTELLIGENT_TIERING")}},
		{"second step: the class changes, the data is in the tier", steps, "a", cur("INTELLIGENT_TIERING", ""), at(4), []lcAction{label("null", "GLACIER")}},
		{"both steps due: the coldest", steps, "a", cur("", "resident"), at(4), []lcAction{move("null", "GLACIER")}},
		{"rules conflict: the coldest", conflict, "a", cur("", "resident"), at(3), []lcAction{move("null", "DEEP_ARCHIVE")}},
		{"rules conflict, one due", conflict, "a", cur("", "resident"), at(2), []lcAction{move("null", "GLACIER")}},
		{"expiration wins", expires, "a", cur("", "resident"), at(6), []lcAction{{vid: "null", current: true}}},
		{"transition before the expiration", expires, "a", cur("", "resident"), at(3), []lcAction{move("null", "GLACIER")}},
		{"before the date", dated, "a", cur("", "resident"), time.Date(2024, 1, 31, 23, 0, 0, 0, time.UTC), nil},
		{"on the date", dated, "a", cur("", "resident"), time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC), []lcAction{move("null", "GLACIER_IR")}},
		{"a delete marker is not transitioned", cold, "cold/a", []lcVersion{{vid: "m", latest: true, marker: true, mtime: t0}}, at(9), nil},
		{"a Transition leaves noncurrent versions", cold, "cold/a", []lcVersion{ver("v2", true, at(1), "", "resident"), ver("v1", false, t0, "", "resident")}, at(3.5), []lcAction{move("v2", "GLACIER")}},
		// v3 current, v2 noncurrent since day 3 (spared: the newest), v1 since day 2.
		{"noncurrent: the older ones move a day after", noncurrent, "k", []lcVersion{ver("v3", true, at(3), "", "resident"), ver("v2", false, at(2), "", "resident"), ver("v1", false, at(1), "", "resident")}, at(3.6),
			[]lcAction{move("v1", "GLACIER")}},
		{"noncurrent: not a day yet", noncurrent, "k", []lcVersion{ver("v3", true, at(3), "", "resident"), ver("v2", false, at(2), "", "resident"), ver("v1", false, at(2.9), "", "resident")}, at(3.2), nil},
		{"noncurrent under a delete marker", noncurrent, "k", []lcVersion{{vid: "m", latest: true, marker: true, mtime: at(5)}, ver("v2", false, at(1), "", "resident"), ver("v1", false, at(0), "", "released")}, at(9),
			[]lcAction{label("v1", "GLACIER")}},
		{"noncurrent expiration wins", ncExpires, "k", []lcVersion{ver("v3", true, at(5), "", "resident"), ver("v2", false, at(4), "", "resident"), ver("v1", false, at(0), "", "resident")}, at(8),
			[]lcAction{{vid: "v1"}, move("v2", "GLACIER")}},
	} {
		got := lifecycleActions(tc.rules, tc.key, tc.versions, tc.now, day)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// The state is read only where a transition could apply.
	for _, tc := range []struct {
		rules []lcRule
		key   string
		v     lcVersion
		want  bool
	}{
		{cold, "cold/a", ver("v", true, t0, "", ""), true},
		{cold, "hot/a", ver("v", true, t0, "", ""), false},
		{cold, "cold/a", ver("v", false, t0, "", ""), false},
		{noncurrent, "k", ver("v", false, t0, "", ""), true},
		{noncurrent, "k", ver("v", true, t0, "", ""), false},
		{disabled, "k", ver("v", true, t0, "", ""), false},
		{cold, "cold/a", lcVersion{vid: "m", latest: true, marker: true}, false},
	} {
		if got := transitionWanted(tc.rules, tc.key, tc.v); got != tc.want {
			t.Errorf("transitionWanted(%q, %+v) = %v", tc.key, tc.v, got)
		}
	}
}

func TestStorageClass(t *testing.T) {
	t.Parallel()
	a := &client.Attr{Size: 5, Mtime: time.Unix(100, 7)}
	m := &objectMeta{Size: 5, Mtime: a.Mtime.UnixNano(), StorageClass: "GLACIER"}
	if got := m.storageClass(a); got != "GLACIER" {
		t.Errorf("recorded class: %q", got)
	}
	changed := &client.Attr{Size: 5, Mtime: time.Unix(101, 0)}
	if got := m.storageClass(changed); got != "STANDARD" {
		t.Errorf("after a change through POSIX: %q", got)
	}
	if got := (&objectMeta{Size: 5, Mtime: a.Mtime.UnixNano()}).storageClass(a); got != "STANDARD" {
		t.Errorf("no class: %q", got)
	}
}
