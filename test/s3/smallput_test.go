package s3

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestSmallPuts: PUTs of objects that fit inline take the one-request path
// (client.PutFile: no temporary file, so the bucket gets no .sluice-s3
// directory) from 8 clients at once, with new parent prefixes and
// overwrites; every object reads back byte for byte with its ETag, the
// conditions and key conflicts answer as on the usual path, an object one
// byte over the limit takes the usual path, and every acknowledged PUT
// survives kill -9 of the server.
func TestSmallPuts(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	c := newS3Client(g.endpoint)
	fc := g.client()
	ctx := context.Background()
	limit := int(fc.InlineMax())
	if limit <= 0 {
		t.Fatalf("inline data is off (InlineMax %d): nothing to test", limit)
	}
	resp, body := c.do(t, "PUT", "/small", nil, nil, nil)
	mustStatus(t, resp, body, 200)

	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	want := map[string][]byte{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range 25 {
				key := fmt.Sprintf("w%d/d%d/k%d", w, i%3, i%10) // i >= 10 overwrites
				size := rng.IntN(limit + 1)
				if i == 0 {
					size = limit
				}
				data := make([]byte, size)
				for j := range data {
					data[j] = byte(rng.Uint32())
				}
				resp, body := c.do(t, "PUT", "/small/"+key, nil, nil, data)
				if resp.StatusCode != 200 {
					t.Errorf("PUT %s (%d bytes): %d %s", key, size, resp.StatusCode, body)
					return
				}
				if et := resp.Header.Get("ETag"); et != `"`+md5hex(data)+`"` {
					t.Errorf("PUT %s: ETag %s, want %q", key, et, md5hex(data))
				}
				mu.Lock()
				want[key] = data
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	check := func(c *s3client) {
		t.Helper()
		for key, data := range want {
			resp, body := c.do(t, "GET", "/small/"+key, nil, nil, nil)
			if resp.StatusCode != 200 || string(body) != string(data) || resp.Header.Get("ETag") != `"`+md5hex(data)+`"` {
				t.Errorf("GET %s: %d, %d bytes (want %d), ETag %s (want %q)", key, resp.StatusCode, len(body), len(data), resp.Header.Get("ETag"), md5hex(data))
			}
		}
	}
	check(c)
	if _, err := fc.Lstat(ctx, "/small/.sluice-s3"); err == nil {
		t.Error("small PUTs made a temporary directory: they did not take the one-request path")
	}

	// Conditions and conflicts, as on the usual path.
	inm := http.Header{"If-None-Match": {"*"}}
	resp, body = c.do(t, "PUT", "/small/w0/d0/k0", nil, inm, []byte("no"))
	mustStatus(t, resp, body, 412)
	resp, body = c.do(t, "PUT", "/small/fresh", nil, inm, []byte("yes"))
	mustStatus(t, resp, body, 200)
	want["fresh"] = []byte("yes")
	resp, body = c.do(t, "PUT", "/small/w0/d0", nil, nil, []byte("a prefix"))
	if resp.StatusCode != 409 || !strings.Contains(string(body), "XSluiceKeyConflict") {
		t.Errorf("PUT over a prefix: %d %s, want 409 XSluiceKeyConflict", resp.StatusCode, body)
	}
	resp, body = c.do(t, "PUT", "/nobucket/k", nil, nil, []byte("x"))
	if resp.StatusCode != 404 || !strings.Contains(string(body), "NoSuchBucket") {
		t.Errorf("PUT into a missing bucket: %d %s, want 404 NoSuchBucket", resp.StatusCode, body)
	}

	// One byte over the limit: the usual path (a temporary file).
	big := []byte(strings.Repeat("b", limit+1))
	resp, body = c.do(t, "PUT", "/small/big", nil, nil, big)
	mustStatus(t, resp, body, 200)
	want["big"] = big
	if _, err := fc.Lstat(ctx, "/small/.sluice-s3"); err != nil {
		t.Errorf("a PUT over the inline limit made no temporary directory (%v): it took the small path", err)
	}

	// Acknowledged PUTs survive kill -9 of the server.
	g.procs[0].Kill()
	g.start()
	check(newS3Client(g.endpoint))
}
