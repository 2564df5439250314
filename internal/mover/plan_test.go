package mover

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func file(name string, size int64, state string, age, unused time.Duration, p Policy) File {
	ino := uint64(0)
	for _, c := range name {
		ino = ino*31 + uint64(c)
	}
	return File{Path: "/d/" + name, Ino: ino, Size: size, State: state, Mtime: t0.Add(-age), Used: t0.Add(-unused), Policy: p, On: map[uint32]int64{1: size}}
}

// on returns f held on targets as given (target, bytes, target, bytes...).
func on(f File, tb ...int64) File {
	f.On = map[uint32]int64{}
	for i := 0; i+1 < len(tb); i += 2 {
		f.On[uint32(tb[i])] = tb[i+1]
	}
	return f
}

// moves renders actions as "kind name" strings.
func moves(as []Action) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.Kind.String()+" "+strings.TrimPrefix(a.File.Path, "/d/"))
	}
	return out
}

func TestPlan(t *testing.T) {
	arch := Policy{ArchiveAfter: time.Hour}
	rel := Policy{ReleaseAfter: 24 * time.Hour}
	both := Policy{ArchiveAfter: time.Hour, ReleaseAfter: 24 * time.Hour}
	wm := Policy{High: 80, Low: 60}
	const G = 1 << 30
	tests := []struct {
		name  string
		files []File
		fill  Fill
		lim   Limits
		want  []string
	}{
		{"nothing due", []File{
			file("new", 1, "resident", time.Minute, time.Minute, arch),
			file("recent", 1, "archived", time.Hour, time.Hour, rel),
		}, Fill{}, Limits{}, []string{}},
		{"archive when unchanged long enough, oldest first", []File{
			file("b", 1, "resident", 2*time.Hour, 0, arch),
			file("a", 1, "dirty", 3*time.Hour, 0, arch),
			file("exact", 1, "resident", time.Hour, 0, arch),
			file("young", 1, "resident", 59*time.Minute, 0, arch),
		}, Fill{}, Limits{}, []string{"archive a", "archive b", "archive exact"}},
		{"archived, released and files without the policy are not archived", []File{
			file("arch", 1, "archived", 5*time.Hour, 0, arch),
			file("rel", 1, "released", 5*time.Hour, 0, arch),
			file("nopol", 1, "resident", 5*time.Hour, 0, rel),
		}, Fill{}, Limits{}, []string{}},
		{"archive cap in bytes, at least one file", []File{
			file("big", 10, "resident", 5*time.Hour, 0, arch),
			file("small", 1, "resident", 4*time.Hour, 0, arch),
		}, Fill{}, Limits{ArchiveBytes: 5}, []string{"archive big"}},
		{"archive cap takes what fits", []File{
			file("a", 3, "resident", 5*time.Hour, 0, arch),
			file("b", 2, "resident", 4*time.Hour, 0, arch),
			file("c", 1, "resident", 3*time.Hour, 0, arch),
		}, Fill{}, Limits{ArchiveBytes: 5}, []string{"archive a", "archive b"}},
		{"release by age only when archived and unused", []File{
			file("old", 1, "archived", 48*time.Hour, 25*time.Hour, both),
			file("used", 1, "archived", 48*time.Hour, time.Hour, both),
			file("dirty", 1, "dirty", 48*time.Hour, 48*time.Hour, rel),
			file("gone", 1, "released", 48*time.Hour, 48*time.Hour, rel),
		}, Fill{}, Limits{}, []string{"release old"}},
		{"pinned files are never released", []File{
			func() File {
				f := file("inline", 1, "archived", 48*time.Hour, 48*time.Hour, rel)
				f.Pinned = true
				return f
			}(),
		}, Fill{}, Limits{}, []string{}},
		{"below the high watermark: nothing", []File{
			file("a", 10*G, "archived", 0, 5*time.Hour, wm),
		}, Fill{Capacity: 100 * G, Used: 79 * G}, Limits{}, []string{}},
		{"at the high watermark: least recently used first down to low", []File{
			file("hot", 10*G, "archived", 0, time.Minute, wm),
			file("cold", 10*G, "archived", 0, 5*time.Hour, wm),
			file("warm", 10*G, "archived", 0, time.Hour, wm),
			file("resident", 50*G, "resident", 0, 9*time.Hour, wm),
		}, Fill{Capacity: 100 * G, Used: 80 * G}, Limits{}, []string{"release cold", "release warm"}},
		{"age releases count toward the low watermark", []File{
			file("aged", 15*G, "archived", 0, 48*time.Hour, Policy{ReleaseAfter: time.Hour, High: 80, Low: 60}),
			file("lru", 10*G, "archived", 0, 5*time.Hour, wm),
			file("next", 10*G, "archived", 0, 4*time.Hour, wm),
		}, Fill{Capacity: 100 * G, Used: 85 * G}, Limits{}, []string{"release aged", "release lru"}},
		{"release cap", []File{
			file("a", 10*G, "archived", 0, 5*time.Hour, wm),
			file("b", 10*G, "archived", 0, 4*time.Hour, wm),
		}, Fill{Capacity: 100 * G, Used: 95 * G}, Limits{Releases: 1}, []string{"release a"}},
		{"each file's own watermarks", []File{
			file("strict", 10*G, "archived", 0, 1*time.Hour, Policy{High: 50, Low: 40}),
			file("lax", 10*G, "archived", 0, 5*time.Hour, Policy{High: 90, Low: 80}),
		}, Fill{Capacity: 100 * G, Used: 70 * G}, Limits{}, []string{"release strict"}},
		{"a file archived this pass is not also released", []File{
			file("x", 1, "resident", 48*time.Hour, 48*time.Hour, both),
		}, Fill{}, Limits{}, []string{"archive x"}},
		{"no capacity known: no watermark release", []File{
			file("a", 10, "archived", 0, 5*time.Hour, wm),
		}, Fill{}, Limits{}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := moves(Plan(tt.files, Fills{1: tt.fill}, t0, tt.lim))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plan = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParsePolicy(t *testing.T) {
	good := []Policy{
		{},
		{Backend: "cold", ArchiveAfter: 30 * time.Minute},
		{ReleaseAfter: 36 * time.Hour, High: 85, Low: 70},
		{Backend: "b", ArchiveAfter: time.Second, ReleaseAfter: time.Hour, High: 100, Low: 1},
		{High: 5, Low: 0},
	}
	for _, p := range good {
		got, err := ParsePolicy(p.Encode())
		if err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %+v, %v; want %+v", p.Encode(), got, err, p)
		}
	}
	bad := []string{
		"", "v2", "v1 ", "v1 backend=", "v1 archive-after=-1m", "v1 archive-after=0s",
		"v1 archive-after=1h archive-after=2h", "v1 high=80", "v1 low=60", "v1 high=60 low=60",
		"v1 high=101 low=1", "v1 high=0 low=0", "v1 high=5 low=-1", "v1 high=080 low=60", "v1 colour=blue", "v1 backend", "v1 high=x low=1",
	}
	for _, s := range bad {
		if p, err := ParsePolicy([]byte(s)); errs.CodeOf(err) != errs.Invalid {
			t.Errorf("ParsePolicy(%q) = %+v, %v; want errs.Invalid", s, p, err)
		}
	}
	if err := (Policy{High: 50, Low: 50}).Validate(); err == nil {
		t.Error("Validate accepted low == high")
	}
}

// FuzzPolicy checks that whatever ParsePolicy accepts encodes back to a
// policy that parses to the same value.
func FuzzPolicy(f *testing.F) {
	f.Add([]byte("v1 backend=cold archive-after=30m0s release-after=24h0m0s high=85 low=70"))
	f.Add([]byte("v1"))
	f.Add([]byte("v1 high=2 low=1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePolicy(b)
		if err != nil {
			return
		}
		q, err := ParsePolicy(p.Encode())
		if err != nil {
			t.Fatalf("ParsePolicy(%q) = %+v, whose encoding %q does not parse: %v", b, p, p.Encode(), err)
		}
		if q != p {
			t.Fatalf("round trip of %q: %+v became %+v", b, p, q)
		}
		if s := fmt.Sprint(p); s == "" {
			t.Fatal("empty String")
		}
	})
}

// FuzzPassRecord checks that a pass record that parses encodes back to
// itself.
func FuzzPassRecord(f *testing.F) {
	f.Add(PassRecord{At: t0, Host: "node-1", Counts: Counts{Files: 3, Archived: 2, ArchivedBytes: 5 << 20, Released: 1, ReleasedBytes: 1 << 20, Took: time.Second}}.Encode())
	f.Add([]byte("v1 at=0 host=h files=0 archived=0 archived-bytes=0 released=0 released-bytes=0 failed=0 took=0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParsePassRecord(b)
		if err != nil {
			return
		}
		q, err := ParsePassRecord(r.Encode())
		if err != nil {
			t.Fatalf("ParsePassRecord(%q) = %+v, whose encoding %q does not parse: %v", b, r, r.Encode(), err)
		}
		if !q.At.Equal(r.At) || q.Host != r.Host || q.Counts != r.Counts {
			t.Fatalf("round trip of %q: %+v became %+v", b, r, q)
		}
	})
}

func TestPassRecord(t *testing.T) {
	r := PassRecord{At: t0, Host: "a b", Counts: Counts{Files: 7, Archived: 1, ArchivedBytes: 9, Released: 2, ReleasedBytes: 10, Failed: 3, Took: time.Minute}}
	got, err := ParsePassRecord(r.Encode())
	r.Host = "a_b"
	if err != nil || !got.At.Equal(r.At) || got.Host != r.Host || got.Files != 7 || got.Failed != 3 || got.Took != time.Minute || got.ReleasedBytes != 10 {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, r)
	}
	for _, bad := range []string{"", "v1", "v2 at=0 host=h files=0 archived=0 archived-bytes=0 released=0 released-bytes=0 failed=0 took=0",
		"v1 host=h at=0 files=0 archived=0 archived-bytes=0 released=0 released-bytes=0 failed=0 took=0",
		"v1 at=x host=h files=0 archived=0 archived-bytes=0 released=0 released-bytes=0 failed=0 took=0"} {
		if _, err := ParsePassRecord([]byte(bad)); errs.CodeOf(err) != errs.Invalid {
			t.Errorf("ParsePassRecord(%q): %v, want errs.Invalid", bad, err)
		}
	}
}

// TestPlanTargets checks the watermarks per target: only files holding
// bytes on a target past its high watermark are released, least recently
// used first, until that target would be at its low one, counting only
// the bytes each release frees there.
func TestPlanTargets(t *testing.T) {
	wm := Policy{High: 80, Low: 60}
	const G = 1 << 30
	full, roomy := Fill{Capacity: 100 * G, Used: 90 * G}, Fill{Capacity: 1000 * G, Used: 100 * G}
	tests := []struct {
		name  string
		files []File
		fills Fills
		want  []string
	}{
		{"only files on the full target", []File{
			on(file("a1", 20*G, "archived", 0, 9*time.Hour, wm), 1, 20*G),
			on(file("b1", 20*G, "archived", 0, 8*time.Hour, wm), 2, 20*G),
			on(file("a2", 20*G, "archived", 0, 7*time.Hour, wm), 1, 20*G),
			on(file("a3", 20*G, "archived", 0, 6*time.Hour, wm), 1, 20*G),
		}, Fills{1: full, 2: roomy}, []string{"release a1", "release a2"}},
		{"a striped file counts only its bytes on the full target", []File{
			on(file("wide", 40*G, "archived", 0, 9*time.Hour, wm), 1, 10*G, 2, 30*G),
			on(file("a1", 15*G, "archived", 0, 8*time.Hour, wm), 1, 15*G),
			on(file("a2", 15*G, "archived", 0, 7*time.Hour, wm), 1, 15*G),
		}, Fills{1: full, 2: roomy}, []string{"release wide", "release a1", "release a2"}},
		{"a file on two full targets frees both", []File{
			on(file("both", 40*G, "archived", 0, 9*time.Hour, wm), 1, 20*G, 2, 20*G),
			on(file("a", 20*G, "archived", 0, 8*time.Hour, wm), 1, 20*G),
			on(file("b", 20*G, "archived", 0, 7*time.Hour, wm), 2, 20*G),
		}, Fills{1: full, 2: full}, []string{"release both", "release a", "release b"}},
		{"age releases free their targets first", []File{
			on(file("aged", 20*G, "archived", 0, 48*time.Hour, Policy{ReleaseAfter: time.Hour}), 1, 20*G),
			on(file("lru", 20*G, "archived", 0, 5*time.Hour, wm), 1, 20*G),
			on(file("next", 20*G, "archived", 0, 4*time.Hour, wm), 1, 20*G),
		}, Fills{1: full}, []string{"release aged", "release lru"}},
		{"an unknown target or no bytes: nothing", []File{
			on(file("elsewhere", 20*G, "archived", 0, 9*time.Hour, wm), 7, 20*G),
			on(file("empty", 0, "archived", 0, 9*time.Hour, wm)),
		}, Fills{1: full}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := moves(Plan(tt.files, tt.fills, t0, Limits{}))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plan = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTargetBytes(t *testing.T) {
	const M = 1 << 20
	reps := map[placement.ChainID][]placement.TargetID{10: {1, 2}, 11: {3, 4}}
	replicas := func(c placement.ChainID) []placement.TargetID { return reps[c] }
	tests := []struct {
		name string
		l    placement.Layout
		size int64
		want map[uint32]int64
	}{
		{"one target", placement.Layout{StripeSize: M, StripeCount: 1, Chains: []placement.ChainID{3}}, 5*M + 7, map[uint32]int64{3: 5*M + 7}},
		{"striped, short last round", placement.Layout{StripeSize: M, StripeCount: 3, Chains: []placement.ChainID{1, 2, 3}}, 4*M + 5,
			map[uint32]int64{1: 2 * M, 2: M + 5, 3: M}},
		{"empty", placement.Layout{StripeSize: M, StripeCount: 2, Chains: []placement.ChainID{1, 2}}, 0, map[uint32]int64{}},
		{"replicated: every replica", placement.Layout{StripeSize: M, StripeCount: 2, Replicas: 2, Chains: []placement.ChainID{10, 11}}, 3 * M,
			map[uint32]int64{1: 2 * M, 2: 2 * M, 3: M, 4: M}},
		{"progressive", placement.Layout{StripeSize: M, StripeCount: 3, Chains: []placement.ChainID{1, 2, 3},
			Comps: []placement.Comp{{End: 2 * M, StripeSize: M, StripeCount: 1}, {StripeSize: M, StripeCount: 2}}}, 5 * M,
			map[uint32]int64{1: 2 * M, 2: 2 * M, 3: M}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TargetBytes(tt.l, tt.size, replicas); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TargetBytes = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPlannerBounded: a Planner fed 100,000 archived files keeps only the
// watermark's candidates it can release (Limits.Releases of them), drops
// files on targets below their High at once, and still releases the
// least recently used files of the full target.
func TestPlannerBounded(t *testing.T) {
	now := time.Unix(1e9, 0)
	fills := Fills{1: {Capacity: 1 << 40, Used: 9 << 37}, 2: {Capacity: 1 << 40, Used: 1 << 37}} // 90%, 12.5%
	pol := Policy{High: 80, Low: 70}
	const n, most = 100000, 50
	p := NewPlanner(fills, now, Limits{Releases: most})
	r := rand.New(rand.NewPCG(7, 8))
	var onFull []File
	for i := range n {
		tgt := uint32(1 + i%2)
		f := File{Path: fmt.Sprintf("/d/%06d", i), Ino: uint64(i + 2), Size: 1 << 20, Used: now.Add(-time.Duration(r.Int64N(1e6)) * time.Second),
			State: "archived", Policy: pol, On: map[uint32]int64{tgt: 1 << 20}}
		if i%10 == 9 {
			f.State = "released"
		}
		p.Add(f)
		if p.lru.Len() > most {
			t.Fatalf("after %d files the planner holds %d candidates, want at most %d", i+1, p.lru.Len(), most)
		}
		if tgt == 1 && f.State == "archived" {
			onFull = append(onFull, f)
		}
	}
	slices.SortFunc(onFull, lessUsed)
	acts := p.Finish()
	if len(acts) != most {
		t.Fatalf("%d actions, want %d", len(acts), most)
	}
	for i, a := range acts {
		if a.Kind != Release || a.File.Path != onFull[i].Path {
			t.Fatalf("action %d: %v %s, want the release of %s (the %dth least recently used on target 1)", i, a.Kind, a.File.Path, onFull[i].Path, i+1)
		}
	}
}
