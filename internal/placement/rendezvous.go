package placement

// Rendezvous returns the r targets of ts that key lands on, by rendezvous
// (highest random weight) hashing: each target scores hash(key, target)
// and the r highest win, in score order. Adding or removing a target
// moves only the keys that rank it among their r. r is capped at len(ts).
func Rendezvous(key string, ts []TargetID, r int) []TargetID {
	r = min(r, len(ts))
	h := uint64(14695981039346656037) // FNV-1a of the key
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	type scored struct {
		t TargetID
		s uint64
	}
	best := make([]scored, 0, r+1)
	for _, t := range ts {
		s := mix64(h ^ (uint64(t) * 0x9e3779b97f4a7c15))
		i := len(best)
		for i > 0 && (best[i-1].s < s || best[i-1].s == s && best[i-1].t > t) {
			i--
		}
		if i < r {
			best = append(best, scored{})
			copy(best[i+1:], best[i:])
			best[i] = scored{t, s}
			if len(best) > r {
				best = best[:r]
			}
		}
	}
	out := make([]TargetID, len(best))
	for i, b := range best {
		out[i] = b.t
	}
	return out
}

// mix64 is SplitMix64's finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
