package qos

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestCPUReserve: while an interactive client reads, a checkpoint
// client's requests go through the server's CPU reserve (its metrics
// count holds), a training client's and a limited job's do not hold
// anything, and every byte the checkpoint writer wrote reads back; with
// --qos-cpu-reserve 0 the server has no reserve at all.
func TestCPUReserve(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	s := startServer(t)
	if got := s.metric("sluice_qos_cpu_reserve_slots", ""); got < 1 {
		t.Fatalf("sluice_qos_cpu_reserve_slots = %v, want at least 1", got)
	}
	setup := newClient(t, s.addr, "", "", 0)
	const size = 8 << 20
	writeFile(t, setup, "/data", size)

	// A checkpoint writer alone: nothing engages the reserve.
	ckpt := newClient(t, s.addr, "ckpt", "checkpoint", 0)
	payload := func(k int) []byte { return bytes.Repeat([]byte{byte(k)}, 1<<20) }
	writeShard := func(k int) {
		t.Helper()
		f, err := ckpt.Create(context.Background(), fmt.Sprintf("/shard%d", k))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			if _, err := f.WriteAt(payload(k+i), int64(i)<<20); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	writeShard(0)
	if got := s.metric("sluice_qos_cpu_reserve_held_total", ""); got != 0 {
		t.Fatalf("the reserve held %v requests with no interactive client", got)
	}

	// Beside an interactive reader it engages for the checkpoint writer.
	reader := newClient(t, s.addr, "infer", "interactive", -1)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { readLoop(ctx, t, reader, "/data", size) })
	deadline := time.Now().Add(time.Minute)
	k := 1
	for s.metric("sluice_qos_cpu_reserve_held_total", "") == 0 {
		if time.Now().After(deadline) {
			stop()
			wg.Wait()
			t.Fatal("no checkpoint request went through the reserve in a minute beside an interactive reader")
		}
		writeShard(k)
		k++
	}
	// A training client's requests pass by.
	held := s.metric("sluice_qos_cpu_reserve_held_total", "")
	train := newClient(t, s.addr, "train", "training", -1)
	writeFile(t, train, "/train", 4<<20)
	buf := make([]byte, 4<<20)
	f, err := train.Open(context.Background(), "/train")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAtContext(context.Background(), buf, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := s.metric("sluice_qos_cpu_reserve_held_total", ""); got != held {
		t.Errorf("training requests went through the reserve: held %v -> %v", held, got)
	}
	// A job with a limit takes no slot: its bucket bounds it already,
	// and one of its requests sleeping on the bucket must not hold the
	// slot other jobs need.
	s.cli("qos", "set", "--job", "ckpt", "--rate", "1G")
	s.waitLimited(1)
	held = s.metric("sluice_qos_cpu_reserve_held_total", "")
	writeShard(k)
	k++
	if got := s.metric("sluice_qos_cpu_reserve_held_total", ""); got != held {
		t.Errorf("a limited job's requests went through the reserve: held %v -> %v", held, got)
	}
	stop()
	wg.Wait()

	for i := range k {
		f, err := setup.Open(context.Background(), fmt.Sprintf("/shard%d", i))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4<<20)
		if _, err := f.ReadAtContext(context.Background(), got, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for j := range 4 {
			if !bytes.Equal(got[j<<20:(j+1)<<20], payload(i+j)) {
				t.Fatalf("shard %d MiB %d reads back wrong", i, j)
			}
		}
	}

	off := startServer(t, "--qos-cpu-reserve", "0")
	if got := off.metric("sluice_qos_cpu_reserve_slots", ""); got != 0 {
		t.Errorf("with --qos-cpu-reserve 0: sluice_qos_cpu_reserve_slots = %v, want none", got)
	}
}

// TestCPUReserveIdleClient: a checkpoint client that does nothing beside
// an interactive reader takes no reserve slot, though it asks the
// service every second whether a profile recording runs for its job
// (those checks, like the QoS settings it polls, are control requests the
// reserve lets by).
func TestCPUReserveIdleClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	s := startServer(t)
	const size = 4 << 20
	s.putFile("/data", size)
	reader := newClient(t, s.addr, "infer", "interactive", -1)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { readLoop(ctx, t, reader, "/data", size) })
	defer func() {
		stop()
		wg.Wait()
	}()
	held := s.metric("sluice_qos_cpu_reserve_held_total", "")
	idle := newClient(t, s.addr, "ckpt-idle", "checkpoint", 0)
	// Three profile checks (client.Options.ProfilePoll, one second) and a
	// QoS poll (client.QosPacePoll, two seconds) at least.
	time.Sleep(3500 * time.Millisecond)
	if got := s.metric("sluice_qos_cpu_reserve_held_total", ""); got != held {
		t.Errorf("an idle checkpoint client's requests went through the reserve: held %v -> %v", held, got)
	}
	idle.Close()
}
