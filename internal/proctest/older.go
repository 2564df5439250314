package proctest

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// rawMsg is a request or reply body passed through unchanged.
type rawMsg struct{ b []byte }

func (m *rawMsg) Encode(e *wire.Encoder) { e.B = append(e.B, m.b...) }
func (m *rawMsg) Decode(d *wire.Decoder) { m.b = append([]byte(nil), d.B...); d.B = d.B[len(d.B):] }

// OlderService stands in front of a real metadata service on loopback and
// answers the given ops "not supported", as a service from before they
// existed does; every other request is passed on. It counts the requests
// it refused, by op.
type OlderService struct {
	Addr string // where clients connect
	mu   sync.Mutex
	refs map[wire.Op]int
}

// StartOlderService starts an OlderService for the service at upstream,
// refusing the ops refuse; it stops when the test ends.
func StartOlderService(t testing.TB, upstream string, refuse ...wire.Op) *OlderService {
	t.Helper()
	return startOlder(t, upstream, 1<<20, false, refuse)
}

// nodeReadMax is the most data an OlderNode passes back for one request:
// a client's largest chunk read (client.maxExtentIO).
const nodeReadMax = 8 << 20

// StartOlderNode is StartOlderService for a single-node server (`sluice
// serve`, whose storage targets answer on the metadata service's
// address): it also names itself as every target's and node's address in
// the cluster information it passes on (wire.OpCluster), so that the
// client's chunk requests come through it too, and it can answer chunk
// ops "not supported" as older targets do.
func StartOlderNode(t testing.TB, upstream string, refuse ...wire.Op) *OlderService {
	t.Helper()
	return startOlder(t, upstream, nodeReadMax, true, refuse)
}

// startOlder starts an OlderService that passes back up to readMax bytes
// of data per request; with node, it names itself as every target's and
// node's address (StartOlderNode).
func startOlder(t testing.TB, upstream string, readMax int, node bool, refuse []wire.Op) *OlderService {
	t.Helper()
	ups := newUpstreams(t, func() string { return upstream })
	o := &OlderService{refs: make(map[wire.Op]int)}
	addr := serveProxy(t, func(ctx context.Context, r *wire.Request) (wire.Response, error) {
		up, err := ups.forConn(ctx, r)
		if err != nil {
			return wire.Response{}, err
		}
		return forward(ctx, up, r, r.Data, readMax)
	}, func(srv *wire.Server) {
		for _, op := range refuse {
			srv.Handle(op, func(context.Context, *wire.Request) (wire.Response, error) {
				o.mu.Lock()
				o.refs[op]++
				o.mu.Unlock()
				return wire.Response{}, errs.New(errs.NotSupported, "wire: unknown op %d", op)
			})
		}
		if !node {
			return
		}
		srv.Handle(wire.OpCluster, func(ctx context.Context, r *wire.Request) (wire.Response, error) {
			up, err := ups.forConn(ctx, r)
			if err != nil {
				return wire.Response{}, err
			}
			var ci wire.ClusterInfo
			if _, err := up.Call(ctx, wire.OpCluster, &rawMsg{r.Body}, nil, &ci, nil); err != nil {
				return wire.Response{}, err
			}
			o.mu.Lock()
			self := o.Addr
			o.mu.Unlock()
			for i := range ci.Targets {
				ci.Targets[i].Addr = self
			}
			for i := range ci.Nodes {
				ci.Nodes[i].Addr = self
			}
			return wire.Response{Msg: &ci}, nil
		})
	})
	o.mu.Lock()
	o.Addr = addr
	o.mu.Unlock()
	return o
}

// serveProxy serves every op but OpSession (which a wire server answers
// itself) with pass on loopback, after which more may change some ops'
// handlers, until the test ends. It returns the address.
func serveProxy(t testing.TB, pass wire.HandlerFunc, more func(*wire.Server)) string {
	t.Helper()
	srv := &wire.Server{}
	for op := wire.Op(1); op < 255; op++ {
		if op != wire.OpSession {
			srv.Handle(op, pass)
		}
	}
	if more != nil {
		more(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// forward passes request r on to up with data (r's own, or a changed
// copy), reading up to bufSize bytes of data back, unchanged.
func forward(ctx context.Context, up *wire.Conn, r *wire.Request, data []byte, bufSize int) (wire.Response, error) {
	var out rawMsg
	buf := make([]byte, bufSize)
	var d [][]byte
	if len(data) > 0 {
		d = [][]byte{data}
	}
	n, err := up.Call(ctx, r.Op, &rawMsg{r.Body}, d, &out, buf)
	return wire.Response{Msg: &out, Data: buf[:n]}, err
}

// Refused returns how many op requests o refused.
func (o *OlderService) Refused(op wire.Op) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refs[op]
}

// upstreams are a proxy's connections to its upstream server, one per
// client connection, each dialed after the client's: a request's ApplyBy
// (wire/applyby.go), passed on raw, counts from its client's hello, so
// the upstream hello must not be older (the bound would come early
// there), only later (it comes late, which a proxy of an older node may
// do: such a node never refuses anything for it).
type upstreams struct {
	addr func() string // "" while there is none yet
	mu   sync.Mutex
	m    map[uint64]*wire.Conn // by Request.Conn
}

func newUpstreams(t testing.TB, addr func() string) *upstreams {
	u := &upstreams{addr: addr, m: make(map[uint64]*wire.Conn)}
	t.Cleanup(func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, c := range u.m {
			c.Close()
		}
	})
	return u
}

// forConn returns the upstream connection for r's client connection.
func (u *upstreams) forConn(ctx context.Context, r *wire.Request) (*wire.Conn, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if c := u.m[r.Conn]; c != nil && c.Err() == nil {
		return c, nil
	}
	addr := u.addr()
	if addr == "" {
		return nil, errs.New(errs.Unavailable, "proctest: proxy has no upstream yet")
	}
	c, err := wire.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	u.m[r.Conn] = c
	return c, nil
}
