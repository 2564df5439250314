package proctest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-fs/sluice/internal/wire"
)

// Garbler stands in front of a real server on loopback, as a network
// between clients and servers: it passes every request on, and flips one
// bit in the data of the chunk writes and KV-cache puts, and of the
// replies to the chunk reads and KV-cache gets, that it is told to
// garble. A server started with `--advertise
// Garbler.Addr` sends its clients' chunk traffic through it.
type Garbler struct {
	Addr string // where clients connect

	mu       sync.Mutex
	upstream string
	ups      *upstreams

	writes, reads      atomic.Int64 // how many more to garble
	garbledW, garbledR atomic.Int64 // how many were garbled
	forwardedOnly      atomic.Bool  // garble only chunk writes a replica forwards
}

// ForwardedOnly makes g garble only the chunk writes that a chain's
// replica passes to the next (not a client's, nor KV puts): the hop
// between storage nodes.
func (g *Garbler) ForwardedOnly() { g.forwardedOnly.Store(true) }

// garbleWrite reports whether to garble the data of request r.
func (g *Garbler) garbleWrite(r *wire.Request) bool {
	switch r.Op {
	case wire.OpChunkWrite:
		if g.forwardedOnly.Load() {
			var m wire.ChunkWriteReq
			if wire.Unmarshal(r.Body, &m) != nil || m.Flags&wire.FlagForwarded == 0 {
				return false
			}
		}
	case wire.OpKVPut:
		if g.forwardedOnly.Load() {
			return false
		}
	default:
		return false
	}
	return take(&g.writes)
}

// StartGarbler listens on loopback; SetUpstream names the server before the
// first request. It stops when the test ends.
func StartGarbler(t testing.TB) *Garbler {
	t.Helper()
	g := &Garbler{}
	// Its cleanup runs after the server's (cleanups run last first).
	g.ups = newUpstreams(t, func() string {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.upstream
	})
	g.Addr = serveProxy(t, g.pass, nil)
	return g
}

// SetUpstream names the server requests go to.
func (g *Garbler) SetUpstream(addr string) {
	g.mu.Lock()
	g.upstream = addr
	g.mu.Unlock()
}

// Garble makes g garble the data of the next writes chunk writes or KV
// puts and of the replies to the next reads chunk reads or KV gets.
func (g *Garbler) Garble(writes, reads int) {
	g.writes.Store(int64(writes))
	g.reads.Store(int64(reads))
}

// Garbled returns how many writes (chunk writes, KV puts) and read
// replies (chunk reads, KV gets) g garbled.
func (g *Garbler) Garbled() (writes, reads int) {
	return int(g.garbledW.Load()), int(g.garbledR.Load())
}

// take reports whether to garble one more of n's kind.
func take(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// flip flips one bit of b, chosen from its length and a count.
func flip(b []byte, k int64) {
	if len(b) > 0 {
		i := int((uint64(k)*2654435761 + uint64(len(b))/3) % uint64(len(b)))
		b[i] ^= 1 << (k % 8)
	}
}

func (g *Garbler) pass(ctx context.Context, r *wire.Request) (wire.Response, error) {
	up, err := g.ups.forConn(ctx, r)
	if err != nil {
		return wire.Response{}, err
	}
	d := r.Data
	if len(d) > 0 && g.garbleWrite(r) {
		d = append([]byte(nil), d...)
		flip(d, g.garbledW.Add(1))
	}
	size := 1 << 20
	reply := r.Op == wire.OpChunkRead || r.Op == wire.OpKVGet // data comes back
	if reply {
		size = wire.MaxData
	}
	resp, err := forward(ctx, up, r, d, size)
	if err == nil && reply && len(resp.Data) > 0 && take(&g.reads) {
		flip(resp.Data, g.garbledR.Add(1))
	}
	return resp, err
}
