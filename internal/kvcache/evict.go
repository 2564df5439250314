package kvcache

// Watermarks of a share's capacity: a put that would take the share past
// the high one evicts down to the low one.
const (
	highWatermark = 95 // percent
	lowWatermark  = 85
)

// candidate is a stored value as eviction sees it.
type candidate struct {
	Key     string
	Size    uint64
	Expired bool // past its TTL: goes first
	Leased  bool // being read: never evicted
}

// planEviction decides what to evict so that a value of incoming bytes
// fits a share holding used bytes of capacity. cands are the share's
// values, least recently used first. Expired values go first, then the
// least recently used unleased ones, until the share with the new value is
// at the low watermark. ok is false when even evicting every unleased
// value cannot make room: then nothing is evicted and the put is refused.
func planEviction(cands []candidate, used, incoming, capacity uint64) (victims []string, ok bool) {
	if incoming > capacity {
		return nil, false
	}
	if used+incoming <= capacity*highWatermark/100 {
		return nil, true
	}
	goal := capacity * lowWatermark / 100
	after := used
	take := func(c candidate) {
		victims = append(victims, c.Key)
		after -= min(c.Size, after)
	}
	for _, c := range cands {
		if c.Expired && !c.Leased {
			take(c)
		}
	}
	for _, c := range cands {
		if after+incoming <= goal {
			break
		}
		if !c.Expired && !c.Leased {
			take(c)
		}
	}
	if after+incoming > capacity {
		return nil, false
	}
	return victims, true
}
