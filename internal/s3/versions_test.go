package s3

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestVersionIDs(t *testing.T) {
	t.Parallel()
	t1 := time.Unix(1700000000, 5)
	t2 := t1.Add(time.Nanosecond)
	a, b := newVersionID(t1), newVersionID(t2)
	if !validVersionID(a) || !validVersionID(b) || len(a) != 32 {
		t.Fatalf("version IDs %q %q are not valid", a, b)
	}
	if !(b < a) {
		t.Errorf("a later version ID %q does not sort before an earlier one %q", b, a)
	}
	for _, v := range []string{"", "NULL", "xyz", strings.Repeat("g", 32), strings.Repeat("A", 32), strings.Repeat("0", 31)} {
		if validVersionID(v) {
			t.Errorf("validVersionID(%q) = true", v)
		}
	}
	// File names round-trip, and sort newest first, null versions too.
	names := []string{versionFileName(b, t2), versionFileName(a, t1), versionFileName("", t1.Add(-time.Second)), versionFileName(nullVersion, t1.Add(-2*time.Second))}
	if !reflect.DeepEqual(names, sortedCopy(names)) {
		t.Errorf("version file names do not sort newest first: %q", names)
	}
	for i, want := range []string{b, a, nullVersion, nullVersion} {
		if got, ok := parseVersionFileName(names[i]); !ok || got != want {
			t.Errorf("parseVersionFileName(%q) = %q, %v; want %q", names[i], got, ok, want)
		}
	}
	for _, n := range []string{"", "v", "k" + a, "v" + a + "x", "v" + strings.Repeat("0", 16) + "nul", "v" + strings.Repeat("z", 16) + "null"} {
		if _, ok := parseVersionFileName(n); ok {
			t.Errorf("parseVersionFileName(%q) accepted", n)
		}
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

func TestVersionDirOf(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"k":       "/b/.sluice-s3/versions/kk",
		"a/b/c":   "/b/.sluice-s3/versions/ka/kb/kc",
		"v1/x y":  "/b/.sluice-s3/versions/kv1/kx y",
		"kk/.a..": "/b/.sluice-s3/versions/kkk/k.a..",
	} {
		if got, err := versionDirOf("b", key); err != nil || got != want {
			t.Errorf("versionDirOf(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
	if _, err := versionDirOf("b", "a/"+strings.Repeat("x", 255)); !hasCode(err, "KeyTooLongError") {
		t.Errorf("a 255-byte component: %v, want KeyTooLongError", err)
	}
	if _, err := versionDirOf("b", "a/"+strings.Repeat("x", 254)); err != nil {
		t.Errorf("a 254-byte component: %v", err)
	}
}

func TestVersioningDecisions(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		state                 versioning
		newID                 bool // a new object gets a generated ID
		keepNull, keepVersion bool // a displaced null / non-null version stays
		replacesNull          bool
		marker, markerIsNull  bool
	}{
		{versioningOff, false, false, false, false, false, false},
		{versioningEnabled, true, true, true, false, true, false},
		{versioningSuspended, false, false, true, true, true, true},
	} {
		if got := newObjectVersion(tc.state, now); (got != "") != tc.newID || (got != "" && !validVersionID(got)) {
			t.Errorf("%q: newObjectVersion = %q", tc.state, got)
		}
		if got := keepsVersion(tc.state, ""); got != tc.keepNull {
			t.Errorf("%q: keepsVersion(null) = %v", tc.state, got)
		}
		if got := keepsVersion(tc.state, newVersionID(now)); got != tc.keepVersion {
			t.Errorf("%q: keepsVersion(id) = %v", tc.state, got)
		}
		if got := replacesNull(tc.state); got != tc.replacesNull {
			t.Errorf("%q: replacesNull = %v", tc.state, got)
		}
		m, vid := deleteMarkerFor(tc.state, now)
		if m != tc.marker || (m && (vid == "") != tc.markerIsNull) {
			t.Errorf("%q: deleteMarkerFor = %v, %q", tc.state, m, vid)
		}
	}
	data, marker := &versionRow{vid: "a"}, &versionRow{vid: "b", marker: true}
	for _, tc := range []struct {
		cur  bool
		head *versionRow
		want bool
	}{
		{false, data, true},
		{false, marker, false},
		{false, nil, false},
		{true, data, false},
	} {
		if got := promotes(tc.cur, tc.head); got != tc.want {
			t.Errorf("promotes(%v, %+v) = %v", tc.cur, tc.head, got)
		}
	}
}

func TestOrderVersions(t *testing.T) {
	t.Parallel()
	row := func(vid string, marker bool) versionRow { return versionRow{key: "k", vid: vid, marker: marker} }
	type flat struct {
		vid            string
		latest, marker bool
	}
	flatten := func(rows []versionRow) []flat {
		var out []flat
		for _, r := range rows {
			out = append(out, flat{r.vid, r.latest, r.marker})
		}
		return out
	}
	cur := row("c", false)
	for name, tc := range map[string]struct {
		cur  *versionRow
		nc   []versionRow
		want []flat
	}{
		"current first":        {&cur, []versionRow{row("b", true), row("a", false)}, []flat{{"c", true, false}, {"b", false, true}, {"a", false, false}}},
		"duplicate of current": {&cur, []versionRow{row("c", false), row("a", false)}, []flat{{"c", true, false}, {"a", false, false}}},
		"marker is latest":     {nil, []versionRow{row("b", true), row("a", false)}, []flat{{"b", true, true}, {"a", false, false}}},
		"no latest object":     {nil, []versionRow{row("b", false), row("a", true)}, []flat{{"b", false, false}, {"a", false, true}}},
		"none":                 {nil, nil, nil},
	} {
		if got := flatten(orderVersions(tc.cur, tc.nc)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
	rows := []versionRow{row("c", false), row("b", false), row("a", false)}
	if got := afterVersion(rows, "b"); len(got) != 1 || got[0].vid != "a" {
		t.Errorf("afterVersion b: %+v", got)
	}
	if got := afterVersion(rows, "x"); len(got) != 0 {
		t.Errorf("afterVersion of a missing version: %+v", got)
	}
}

func TestMergeItems(t *testing.T) {
	t.Parallel()
	items := func(keys ...string) []listItem {
		var out []listItem
		for _, k := range keys {
			out = append(out, listItem{key: k, prefix: strings.HasSuffix(k, "/")})
		}
		return out
	}
	keys := func(its []listItem) []string {
		var out []string
		for _, it := range its {
			out = append(out, it.key)
		}
		return out
	}
	for name, tc := range map[string]struct {
		a, b    []listItem
		aT, bT  bool
		want    []string
		wantCut bool
	}{
		"union":             {items("a", "c"), items("b", "c", "d/"), false, false, []string{"a", "b", "c", "d/"}, false},
		"bounded by a":      {items("a", "b"), items("a", "c", "d"), true, false, []string{"a", "b"}, true},
		"bounded by b":      {items("a", "e"), items("b", "c"), false, true, []string{"a", "b", "c"}, true},
		"tighter bound":     {items("a", "d"), items("b", "c"), true, true, []string{"a", "b", "c"}, true},
		"one side empty":    {nil, items("x"), false, false, []string{"x"}, false},
		"truncated but nil": {nil, items("x"), true, false, []string{"x"}, true},
	} {
		got, cut := mergeItems(tc.a, tc.aT, tc.b, tc.bT)
		if !reflect.DeepEqual(keys(got), tc.want) || cut != tc.wantCut {
			t.Errorf("%s: %q cut=%v, want %q cut=%v", name, keys(got), cut, tc.want, tc.wantCut)
		}
	}
	p := &versionPage{max: 2}
	if !p.add(versionRow{}) || !p.add(versionRow{}) || p.add(versionRow{}) || !p.truncated || len(p.rows) != 2 {
		t.Errorf("versionPage of 2: %+v", p)
	}
}

func TestConfigCache(t *testing.T) {
	t.Parallel()
	c := newConfigCache(5 * time.Second)
	now := time.Unix(1000, 0)
	c.put("b", "x", []byte("v"), now)
	if a, ok := c.get("b", "x", now.Add(4*time.Second)); !ok || string(a.val) != "v" {
		t.Errorf("fresh entry: %v %v", a, ok)
	}
	if _, ok := c.get("b", "x", now.Add(5*time.Second)); ok {
		t.Error("an entry older than the TTL was used")
	}
	if _, ok := c.get("b", "x", now.Add(-time.Second)); ok {
		t.Error("an entry from the future (clock stepped back) was used")
	}
	c.put("b", "y", nil, now)
	if a, ok := c.get("b", "y", now); !ok || a.val != nil {
		t.Errorf("absent attribute: %v %v", a, ok)
	}
	c.forget("b")
	if _, ok := c.get("b", "y", now); ok {
		t.Error("forget left an entry")
	}
}
