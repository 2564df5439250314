package cluster

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// TestGarbledReplicaHop puts a network that flips bits in the chunk writes
// one replica forwards to the next in front of every storage node (each
// node advertises its garbler's address): the next replica refuses the
// garbled data, the client sends the write again, and both replicas end
// with the same chunks and the file with exactly the bytes written.
func TestGarbledReplicaHop(t *testing.T) {
	var gs []*proctest.Garbler
	var listens []string
	for range 3 {
		g := proctest.StartGarbler(t)
		g.ForwardedOnly()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listens = append(listens, ln.Addr().String())
		ln.Close()
		g.SetUpstream(listens[len(listens)-1])
		gs = append(gs, g)
	}
	cl := proctest.StartCluster(t, binary, proctest.ClusterOptions{Nodes: 3, TargetsPerNode: 1, NodeArgs: func(i int) []string {
		return []string{"--listen", listens[i], "--advertise", gs[i].Addr}
	}})
	ctx := context.Background()
	c := proctest.Client(t, cl.MetaAddrs())
	if err := c.MkdirAll(ctx, "/g", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLayout(ctx, "/g", client.Layout{StripeSize: 1 << 20, StripeCount: 2, Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, 5<<20+777)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, g := range gs {
		g.Garble(2, 0)
	}
	f, err := c.Create(ctx, "/g/file")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close after forwarded writes were garbled (and sent again): %v", err)
	}
	garbled := 0
	for _, g := range gs {
		w, _ := g.Garbled()
		garbled += w
	}
	if garbled == 0 {
		t.Fatal("no forwarded write was garbled: the test did not test")
	}
	got, err := readFile(ctx, proctest.Client(t, cl.MetaAddrs()), "/g/file")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), not the %d written", len(got), err, len(data))
	}
	if n := verifyReplicas(t, cl); n == 0 {
		t.Fatal("no replicated chunks to compare")
	}
	t.Logf("%d forwarded writes garbled and refused; replicas identical", garbled)
}
