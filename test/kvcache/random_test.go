package kvcache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/fsx"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestKVRandom is the KV-cache store's exerciser: random sequences of
// batch puts, gets, ranged gets (on and off the 1 MiB blocks whose cached
// ranges go out unread, ADR 0030), deletes and prefix lookups from two
// clients, of values from 1 byte to 5 MiB (sizes around the block edges
// often), each answer checked byte for byte against a model; and kill -9
// of the server at random points, some with a put in flight, after which
// every acknowledged value reads back whole and the put in flight either
// stored its whole value or nothing. The seed is printed; the fsx
// variables replay one (SLUICE_FSX_SEED, SLUICE_FSX_OPS; SLUICE_FSX_LONG=1
// runs 1,000,000 operations).
func TestKVRandom(t *testing.T) {
	plan, err := fsx.PlanFromEnv(300, 21, 22)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range plan.Seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("seed %d, %d operations (replay: SLUICE_FSX_SEED=%d SLUICE_FSX_OPS=%d)", seed, plan.Ops, seed, plan.Ops)
			kvRandom(t, seed, plan.Ops)
		})
	}
}

// kvSizes are value sizes the exerciser picks often: around the blocks
// (1 MiB) that a get may send unread, and around a put's parts.
var kvSizes = []int{1, 100, 4096, 64 << 10, 1<<20 - 1, 1 << 20, 1<<20 + 1, 2 << 20, 3<<20 + 17}

type kvRun struct {
	t       *testing.T
	rng     *rand.Rand
	dataDir string
	proc    *proctest.Proc
	addr    string
	stores  [2]*client.KVStore
	clients [2]*client.Client
	model   map[string][]byte // acknowledged values
	bytes   int               // their total size
	crashes int               // keys of puts in flight at a kill: "crash/N"
	op      int
	what    string
}

// fail reports a wrong answer with what is needed to replay it.
func (r *kvRun) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("operation %d (%s): %s", r.op, r.what, fmt.Sprintf(format, args...))
}

func kvRandom(t *testing.T, seed uint64, ops int) {
	r := &kvRun{t: t, rng: rand.New(rand.NewPCG(seed, 0x6b76)), dataDir: t.TempDir(), model: map[string][]byte{}}
	replicas := 1 + int(seed%2)
	r.start()
	ctx := context.Background()
	// 4 targets x 1 GiB: the model stays far below, so nothing is evicted.
	if err := proctest.Client(t, r.addr).KVCreate(ctx, "x", client.KVConfig{Capacity: 4 << 30, Replicas: replicas}); err != nil {
		t.Fatal(err)
	}
	r.open()
	t.Logf("replicas %d", replicas)
	for r.op = 0; r.op < ops; r.op++ {
		switch n := r.rng.IntN(100); {
		case n < 30:
			r.put()
		case n < 55:
			r.get()
		case n < 75:
			r.getAt()
		case n < 87:
			r.del()
		case n < 98:
			r.exists()
		default:
			r.restart()
		}
	}
	r.what = "final check"
	r.checkAll()
}

// start starts the server, on the address it had when it restarts.
func (r *kvRun) start() {
	if r.addr == "" {
		r.proc, r.addr = serve(r.t, r.dataDir)
		return
	}
	r.proc, _ = serveAt(r.t, r.dataDir, r.addr)
}

// open connects two clients to the server just started.
func (r *kvRun) open() {
	for i := range r.clients {
		var err error
		r.clients[i] = proctest.Client(r.t, r.addr)
		if r.stores[i], err = r.clients[i].KVOpen(context.Background(), "x"); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *kvRun) store() *client.KVStore { return r.stores[r.rng.IntN(2)] }

func (r *kvRun) key() string { return fmt.Sprintf("k/%d", r.rng.IntN(48)) }

// keys returns 1 to max distinct keys.
func (r *kvRun) keys(max int) []string {
	var ks []string
	for range 1 + r.rng.IntN(max) {
		if k := r.key(); !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	return ks
}

func (r *kvRun) value() []byte {
	n := kvSizes[r.rng.IntN(len(kvSizes))]
	if r.rng.IntN(3) == 0 {
		n = 1 + r.rng.IntN(5<<20)
	}
	var seed [32]byte
	for i := range 4 {
		v := r.rng.Uint64()
		for j := range 8 {
			seed[8*i+j] = byte(v >> (8 * j))
		}
	}
	b := make([]byte, n)
	rand.NewChaCha8(seed).Read(b)
	return b
}

func (r *kvRun) put() {
	ks := r.keys(3)
	if r.bytes > 96<<20 { // keep the store small: remove instead
		r.del()
		return
	}
	vs := make([][]byte, len(ks))
	for i := range ks {
		vs[i] = r.value()
	}
	r.what = fmt.Sprintf("put %q", ks)
	stored, err := r.store().Put(context.Background(), ks, vs)
	if err != nil {
		r.fail("%v", err)
	}
	for i, k := range ks {
		_, had := r.model[k]
		if stored[i] == had {
			r.fail("key %q: stored %v, but it had a value: %v", k, stored[i], had)
		}
		if stored[i] {
			r.model[k] = vs[i]
			r.bytes += len(vs[i])
		}
	}
}

func (r *kvRun) get() {
	ks := r.keys(4)
	bufs := make([][]byte, len(ks))
	for i, k := range ks {
		bufs[i] = make([]byte, len(r.model[k])+r.rng.IntN(3)*r.rng.IntN(1<<20))
	}
	r.what = fmt.Sprintf("get %q", ks)
	n, err := r.store().Get(context.Background(), ks, bufs)
	if err != nil {
		r.fail("%v", err)
	}
	for i, k := range ks {
		v, ok := r.model[k]
		switch {
		case !ok && n[i] != -1:
			r.fail("key %q has no value, get read %d bytes", k, n[i])
		case ok && (n[i] != len(v) || !bytes.Equal(bufs[i][:n[i]], v)):
			r.fail("key %q: %d bytes read, not its %d-byte value (first difference at %d)", k, n[i], len(v), firstDiff(bufs[i][:max(n[i], 0)], v))
		}
	}
	// A buffer too short for the value is errs.Range.
	if k := ks[0]; len(r.model[k]) > 1 && r.rng.IntN(4) == 0 {
		r.what = fmt.Sprintf("get %q into a short buffer", k)
		if _, err := r.store().Get(context.Background(), []string{k}, [][]byte{make([]byte, len(r.model[k])-1)}); errs.CodeOf(err) != errs.Range {
			r.fail("got %v, want a range error", err)
		}
	}
}

func (r *kvRun) getAt() {
	k := r.key()
	v, ok := r.model[k]
	off := 0
	switch {
	case !ok:
	case r.rng.IntN(2) == 0: // on a block
		off = r.rng.IntN(len(v)/(1<<20)+1) << 20
	default:
		off = r.rng.IntN(len(v) + 1)
	}
	n := 1 + r.rng.IntN(3<<20)
	if r.rng.IntN(2) == 0 {
		n = (1 + r.rng.IntN(3)) << 20
	}
	p := make([]byte, n)
	r.what = fmt.Sprintf("get %q at %d, %d bytes", k, off, n)
	got, total, err := r.store().GetAt(context.Background(), k, p, int64(off))
	if !ok {
		if errs.CodeOf(err) != errs.NotFound {
			r.fail("key without a value: %v", err)
		}
		return
	}
	want := v[off:min(off+n, len(v))]
	if err != nil || total != int64(len(v)) || got != len(want) || !bytes.Equal(p[:got], want) {
		r.fail("%d bytes of %d, %v; want %d of %d (first difference at %d)", got, total, err, len(want), len(v), firstDiff(p[:got], want))
	}
}

func (r *kvRun) del() {
	ks := r.keys(3)
	want := 0
	for _, k := range ks {
		if v, ok := r.model[k]; ok {
			want++
			r.bytes -= len(v)
			delete(r.model, k)
		}
	}
	r.what = fmt.Sprintf("delete %q", ks)
	n, err := r.store().Delete(context.Background(), ks)
	if err != nil || n != want {
		r.fail("%d deleted, %v; want %d", n, err, want)
	}
}

func (r *kvRun) exists() {
	var ks []string
	for range 1 + r.rng.IntN(6) {
		ks = append(ks, r.key())
	}
	want := 0
	for want < len(ks) && r.model[ks[want]] != nil {
		want++
	}
	r.what = fmt.Sprintf("exists %q", ks)
	if n, err := r.store().Exists(context.Background(), ks); err != nil || n != want {
		r.fail("%d, %v; want %d", n, err, want)
	}
}

// restart kills the server (kill -9), sometimes with a put in flight, and
// starts it again on the same data and address: every acknowledged value
// is there, and the put in flight, whose client goes on across the
// restart (its connection broke: the put goes again from its start),
// succeeds and reads back whole.
func (r *kvRun) restart() {
	var inflight string
	var val []byte
	var putErr error
	done := make(chan struct{})
	if r.rng.IntN(2) == 0 {
		inflight, val = fmt.Sprintf("crash/%d", r.crashes), r.value()
		r.crashes++
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		s := r.stores[0]
		go func() {
			defer close(done)
			defer cancel()
			_, putErr = s.Put(ctx, []string{inflight}, [][]byte{val})
		}()
		time.Sleep(time.Duration(r.rng.IntN(3000)) * time.Microsecond)
	} else {
		close(done)
	}
	r.what = fmt.Sprintf("kill -9 and restart (put of %q in flight)", inflight)
	r.proc.Kill()
	r.start()
	<-done
	if putErr != nil {
		r.fail("the put in flight failed across the restart: %v", putErr)
	}
	for _, c := range r.clients {
		c.Close()
	}
	r.open()
	if inflight != "" {
		buf := make([]byte, len(val))
		n, err := r.stores[1].Get(context.Background(), []string{inflight}, [][]byte{buf})
		if err != nil || n[0] != len(val) || !bytes.Equal(buf, val) {
			r.fail("the put in flight reads %v bytes, %v: not its whole value", n, err)
		}
		r.model[inflight] = val
		r.bytes += len(val)
	}
	r.checkAll()
}

// checkAll lists the store and reads every value.
func (r *kvRun) checkAll() {
	ctx := context.Background()
	list, err := r.stores[0].List(ctx)
	if err != nil {
		r.fail("list: %v", err)
	}
	listed := map[string]int64{}
	for _, e := range list {
		listed[e.Key] = e.Size
	}
	for k, v := range r.model {
		if listed[k] != int64(len(v)) {
			r.fail("key %q listed with %d bytes, want %d", k, listed[k], len(v))
		}
		buf := make([]byte, len(v))
		if n, err := r.stores[1].Get(ctx, []string{k}, [][]byte{buf}); err != nil || n[0] != len(v) || !bytes.Equal(buf, v) {
			r.fail("key %q: %v bytes, %v; not its %d-byte value", k, n, err, len(v))
		}
	}
	for k := range listed {
		if _, ok := r.model[k]; !ok {
			r.fail("key %q listed, but it has no value", k)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
