package fuse

import (
	"math/rand/v2"
	"os"
	"slices"
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

// oneOf returns one of names that model holds, in a reproducible order,
// or false if it holds none.
func oneOf[V any](r *randomTurns, names []string, model map[string]V) (string, bool) {
	var have []string
	for _, n := range names {
		if _, ok := model[n]; ok {
			have = append(have, n)
		}
	}
	if len(have) == 0 {
		return "", false
	}
	slices.Sort(have)
	return have[r.rng.IntN(len(have))], true
}
