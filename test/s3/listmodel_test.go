package s3

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestListingModel puts, overwrites and deletes random keys (through the
// gateway, and some files written and changed through the client library,
// which the gateway lists with a derived ETag) in names whose bytes sort
// below, at and above '/', then pages through random listings (V2 and
// V1, prefixes, delimiters, start keys, pages of 1 to 1,000 keys) and
// checks every page against a sorted model: keys, common prefixes, sizes,
// and the ETags (the MD5 of what was put, or for files written through
// the library the one a HEAD returns). SLUICE_LIST_SEED replays a run.
func TestListingModel(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	if v := os.Getenv("SLUICE_LIST_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (replay: SLUICE_LIST_SEED=%d go test -run TestListingModel ./test/s3)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	g := startGateway(t)
	c := newS3Client(g.endpoint)
	fc := g.client()
	ctx := context.Background()
	if resp, body := c.do(t, "PUT", "/lmodel", nil, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("create bucket: %s", body)
	}
	// Directory names and file names come from disjoint sets, so that no
	// key is also a prefix of another (docs/s3.md, Limitations).
	dirs := []string{"d", "d-x", "d.y", "d0", "e", "e e"}
	files := []string{"f", "f-1", "f.2", "f!", "g", "g~", "a b", "d-", "e.txt"}
	randKey := func() string {
		var parts []string
		for range rng.IntN(3) {
			parts = append(parts, dirs[rng.IntN(len(dirs))])
		}
		return strings.Join(append(parts, files[rng.IntN(len(files))]), "/")
	}
	type object struct {
		etag string // "" for a file written through the library: a HEAD tells
		size int64
	}
	model := map[string]object{}
	for i := range 400 {
		k := randKey()
		switch op := rng.IntN(10); {
		case op < 6:
			body := []byte(fmt.Sprintf("%s #%d %s", k, i, strings.Repeat("x", rng.IntN(64))))
			resp, rb := c.do(t, "PUT", "/lmodel/"+k, nil, nil, body)
			mustStatus(t, resp, rb, 200)
			model[k] = object{etag: `"` + md5hex(body) + `"`, size: int64(len(body))}
		case op < 8:
			body := []byte(strings.Repeat("p", 1+rng.IntN(100)))
			if i := strings.LastIndexByte(k, '/'); i >= 0 {
				if err := fc.MkdirAll(ctx, "/lmodel/"+k[:i], 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := proctest.WriteFile(ctx, fc, "/lmodel/"+k, body); err != nil {
				t.Fatal(err)
			}
			model[k] = object{size: int64(len(body))}
		default:
			resp, rb := c.do(t, "DELETE", "/lmodel/"+k, nil, nil, nil)
			mustStatus(t, resp, rb, 204)
			delete(model, k)
		}
	}
	// A directory of more objects than one listing page holds, with a
	// few holes, so that pages of every listing continue and hit
	// removed names.
	var wg sync.WaitGroup
	bigs := make([]object, 1300)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(bigs); i += 8 {
				body := []byte(fmt.Sprintf("big %d", i))
				resp, rb := c.do(t, "PUT", fmt.Sprintf("/lmodel/big/n%04d", i), nil, nil, body)
				if resp.StatusCode != 200 {
					t.Errorf("put big/n%04d: %s", i, rb)
					return
				}
				bigs[i] = object{etag: `"` + md5hex(body) + `"`, size: int64(len(body))}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, o := range bigs {
		if rng.IntN(20) == 0 {
			resp, rb := c.do(t, "DELETE", fmt.Sprintf("/lmodel/big/n%04d", i), nil, nil, nil)
			mustStatus(t, resp, rb, 204)
			continue
		}
		model[fmt.Sprintf("big/n%04d", i)] = o
	}
	for k, o := range model {
		if o.etag == "" {
			resp, rb := c.do(t, "HEAD", "/lmodel/"+k, nil, nil, nil)
			mustStatus(t, resp, rb, 200)
			o.etag = resp.Header.Get("ETag")
			model[k] = o
		}
	}
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Logf("%d objects", len(keys))

	// expect lists the model as S3 does: keys after start with the prefix,
	// those with the delimiter after the prefix rolled up into common
	// prefixes, in one sorted sequence.
	expect := func(prefix, delim, start string) (items []string, isPrefix map[string]bool) {
		isPrefix = map[string]bool{}
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix) {
				continue
			}
			item := k
			if delim != "" {
				if i := strings.Index(k[len(prefix):], delim); i >= 0 {
					item = k[:len(prefix)+i+len(delim)]
					isPrefix[item] = true
				}
			}
			if item <= start || (len(items) > 0 && items[len(items)-1] == item) {
				continue
			}
			items = append(items, item)
		}
		return items, isPrefix
	}
	prefixes := []string{"", "d", "d/", "d-", "d-x/", "e", "e e/", "d/d", "f", "x", "big/", "big/n1", "b"}
	for q := range 60 {
		prefix := prefixes[rng.IntN(len(prefixes))]
		delim := []string{"", "/", "/", "-"}[rng.IntN(4)]
		start := ""
		if rng.IntN(2) == 0 && len(keys) > 0 {
			start = keys[rng.IntN(len(keys))]
			if rng.IntN(2) == 0 {
				start = start[:rng.IntN(len(start)+1)]
			}
		}
		maxKeys := []int{1, 2, 3, 7, 1000}[rng.IntN(5)]
		v1 := rng.IntN(3) == 0
		want, isPrefix := expect(prefix, delim, start)
		var got []string
		params := url.Values{"prefix": {prefix}, "delimiter": {delim}, "max-keys": {strconv.Itoa(maxKeys)}}
		if v1 {
			params.Set("marker", start)
		} else {
			params.Set("start-after", start)
		}
		what := fmt.Sprintf("query %d (V1 %v, prefix %q, delimiter %q, start %q, max-keys %d)", q, v1, prefix, delim, start, maxKeys)
		for pages := 0; ; pages++ {
			if pages > len(keys)+2 {
				t.Fatalf("%s: endless pagination", what)
			}
			r := c.list(t, "lmodel", params)
			if n := len(r.Contents) + len(r.CommonPrefixes); n > maxKeys || (r.IsTruncated && n == 0) {
				t.Fatalf("%s: a page of %d items, truncated %v", what, n, r.IsTruncated)
			}
			var page []string
			for _, o := range r.Contents {
				m, ok := model[o.Key]
				if !ok || isPrefix[o.Key] {
					t.Fatalf("%s: listed key %q, which is not an object of the model", what, o.Key)
				}
				if o.ETag != m.etag || o.Size != m.size {
					t.Fatalf("%s: key %q listed with ETag %s size %d, want %s size %d", what, o.Key, o.ETag, o.Size, m.etag, m.size)
				}
				page = append(page, o.Key)
			}
			for _, p := range r.CommonPrefixes {
				if !isPrefix[p.Prefix] {
					t.Fatalf("%s: listed common prefix %q, which the model does not have", what, p.Prefix)
				}
				page = append(page, p.Prefix)
			}
			sort.Strings(page) // a page has its keys, then its prefixes
			got = append(got, page...)
			if !r.IsTruncated {
				break
			}
			if v1 {
				params.Set("marker", r.NextMarker)
			} else {
				params.Set("continuation-token", r.NextContinuationToken)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: listed\n%q\nwant\n%q", what, got, want)
		}
	}
}
