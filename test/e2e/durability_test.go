package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// TestKill9DuringMetadataStorm kills `sluice serve` with SIGKILL while
// several client goroutines create and unlink empty files as fast as they
// can, restarts it, and checks every acknowledged operation: each file
// whose create was acknowledged (and whose unlink was not) exists, and
// each file whose unlink was acknowledged is gone. Operations in flight at
// the kill may have happened or not. Under the default policy (group)
// the server acknowledges before syncing, so this is the test that an
// acknowledgement means "in the operating system" (ADR 0006); under
// always it is the old behaviour.
func TestKill9DuringMetadataStorm(t *testing.T) {
	for _, policy := range []string{"group", "always"} {
		t.Run(policy, func(t *testing.T) { kill9Storm(t, policy) })
	}
}

type fileState uint8

const (
	stateCreating  fileState = iota + 1 // create sent, no answer yet
	stateLive                           // create acknowledged
	stateUnlinking                      // unlink sent, no answer yet
	stateGone                           // unlink acknowledged
)

func kill9Storm(t *testing.T, policy string) {
	s := startServer(t, "", "--meta-sync", policy)
	c := s.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/storm", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := c.Stat(ctx, "/storm")
	if err != nil {
		t.Fatal(err)
	}
	parent := dir.Attr().Ino

	const workers = 6
	var mu sync.Mutex
	state := map[string]fileState{}
	set := func(name string, st fileState) {
		mu.Lock()
		state[name] = st
		mu.Unlock()
	}
	var acked int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var live []string // this worker's acknowledged, not yet unlinked files
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%3 == 2 && len(live) > 0 {
					// Unlink one of the worker's files: every third
					// operation, the oldest, so that the survivors are a mix.
					name := live[0]
					set(name, stateUnlinking)
					if err := c.UnlinkIno(ctx, parent, name); err != nil {
						return
					}
					live = live[1:]
					set(name, stateGone)
				} else {
					name := fmt.Sprintf("w%d-%06d", w, i)
					set(name, stateCreating)
					if _, err := c.CreateIno(ctx, parent, name, syscall.S_IFREG|0o644, 0, client.Owner{}, true); err != nil {
						return
					}
					live = append(live, name)
					set(name, stateLive)
				}
				mu.Lock()
				acked++
				mu.Unlock()
			}
		})
	}
	// Kill mid-storm, once enough operations were acknowledged.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := acked
		mu.Unlock()
		if n >= 3000 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.kill()
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	counts := map[fileState]int{}
	for _, st := range state {
		counts[st]++
	}
	if counts[stateLive] == 0 || counts[stateGone] == 0 {
		t.Fatalf("no acknowledged creates or unlinks before the kill: %v", counts)
	}
	t.Logf("killed after %d acknowledged operations: %d files live, %d unlinked, %d creates and %d unlinks in flight",
		acked, counts[stateLive], counts[stateGone], counts[stateCreating], counts[stateUnlinking])

	s2 := startServer(t, s.dataDir, "--meta-sync", policy)
	c2 := s2.client()
	entries, err := c2.ReadDirAll(ctx, "/storm")
	if err != nil {
		t.Fatal(err)
	}
	found := make(map[string]bool, len(entries))
	for _, e := range entries {
		found[e.Name] = true
		if _, ok := state[e.Name]; !ok {
			t.Errorf("%s exists but was never created", e.Name)
		}
	}
	lost, back := 0, 0
	for name, st := range state {
		switch {
		case st == stateLive && !found[name]:
			if lost++; lost <= 10 {
				t.Errorf("acknowledged create of %s lost by kill -9", name)
			}
		case st == stateGone && found[name]:
			if back++; back <= 10 {
				t.Errorf("acknowledged unlink of %s undone by kill -9", name)
			}
		}
	}
	if lost+back > 0 {
		t.Fatalf("%d acknowledged creates lost, %d acknowledged unlinks undone", lost, back)
	}
	// The file system is still usable.
	if _, err := c2.CreateIno(ctx, parent, "after", syscall.S_IFREG|0o644, 0, client.Owner{}, true); err != nil {
		t.Fatal(err)
	}
	s2.stop()
}
