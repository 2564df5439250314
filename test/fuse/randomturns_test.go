package fuse

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// randomTurns is the set-up of a randomized test of turns: the seed (a
// fresh one, or SLUICE_<NAME>_SEED to replay one), the number of turns
// (SLUICE_<NAME>_TURNS, default turns), logged so that a failure can be
// replayed.
type randomTurns struct {
	seed  uint64
	turns int
	rng   *rand.Rand
}

func newRandomTurns(t *testing.T, name string, turns int, stream uint64) *randomTurns {
	t.Helper()
	r := &randomTurns{seed: uint64(time.Now().UnixNano()), turns: turns}
	seedVar, turnsVar := "SLUICE_"+name+"_SEED", "SLUICE_"+name+"_TURNS"
	if v := os.Getenv(seedVar); v != "" {
		var err error
		if r.seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", seedVar, v, err)
		}
	}
	if v := os.Getenv(turnsVar); v != "" {
		var err error
		if r.turns, err = strconv.Atoi(v); err != nil || r.turns < 1 {
			t.Fatalf("%s=%q: want a positive number", turnsVar, v)
		}
	}
	t.Logf("seed %d (%s=%d replays it), %d turns", r.seed, seedVar, r.seed, r.turns)
	r.rng = rand.New(rand.NewPCG(r.seed, stream))
	return r
}

// bytes returns n random bytes.
func (r *randomTurns) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.rng.Uint32())
	}
	return b
}

// size returns a file size: small, around the inline limit (16 KiB),
// around a 64 KiB block, or anything below large.
func (r *randomTurns) size(large int) int {
	switch r.rng.IntN(4) {
	case 0:
		return r.rng.IntN(200)
	case 1:
		return 12<<10 + r.rng.IntN(8<<10)
	case 2:
		return 60<<10 + r.rng.IntN(10<<10)
	}
	return r.rng.IntN(large)
}

// fail ends t at turn, with the seed that replays it.
func (r *randomTurns) fail(t *testing.T, turn int, format string, args ...any) {
	t.Helper()
	t.Fatalf("turn %d: %s (seed %d)", turn, fmt.Sprintf(format, args...), r.seed)
}

// oneOf returns one of names (in their order) that model holds, or false
// if it holds none.
func oneOf[V any](rng *rand.Rand, names []string, model map[string]V) (string, bool) {
	var have []string
	for _, n := range names {
		if _, ok := model[n]; ok {
			have = append(have, n)
		}
	}
	if len(have) == 0 {
		return "", false
	}
	return have[rng.IntN(len(have))], true
}

// pollFor runs check until it succeeds or the change feed's bound on this
// machine passes (a poll is answered at once when changes wait; feedBound,
// as TestChangeFeedRandom allows, covers a machine loaded by a whole CI run
// beside), and returns its last error.
func pollFor(check func() error) error {
	deadline := time.Now().Add(feedBound)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
