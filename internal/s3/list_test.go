package s3

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestStartCursor: a walk that starts a directory's listing after
// startCursor misses no name that holds a key after the start key: every
// name at or below the cursor is a key below the start key, and so are
// all the keys below it if it is a directory. Random names over an
// alphabet with bytes below, at and above '/' in the sort order.
func TestStartCursor(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	const alphabet = "ab-.!0~"
	word := func() string {
		b := make([]byte, 1+rng.IntN(4))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	skipped := 0
	for range 20000 {
		dk := ""
		if rng.IntN(2) == 0 {
			dk = word() + "/"
		}
		after := dk + word()
		if rng.IntN(2) == 0 {
			after += "/" + word()
		}
		l := &lister{after: after}
		cursor := l.startCursor(dk)
		for range 20 {
			n := word()
			if n > cursor {
				continue // listed
			}
			skipped++
			if dk+n > after {
				t.Fatalf("dk %q, start key %q: cursor %q skips name %q, a key after the start", dk, after, cursor, n)
			}
			if p := dk + n + "/"; strings.HasPrefix(after, p) || p > after {
				t.Fatalf("dk %q, start key %q: cursor %q skips directory %q, which holds keys after the start", dk, after, cursor, n)
			}
		}
	}
	if skipped == 0 {
		t.Fatal("no name was ever skipped: the cursor starts nowhere")
	}
}
