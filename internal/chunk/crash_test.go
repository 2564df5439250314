package chunk

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const crashEnv = "SLUICE_CHUNK_CRASH_DIR"

type crashOp struct {
	id        ID
	off, n    int64
	seed      uint64 // 0: a punch (Punch), else a write of pattern(seed, n)
	acked     bool
	completed bool
}

// apply applies op to m: the write, or the punch's zeros (within m).
func (op *crashOp) apply(m *model) {
	if op.seed != 0 {
		m.write(op.off, pattern(op.seed, int(op.n)))
		return
	}
	if end := min(op.off+op.n, int64(len(*m))); op.off < end {
		clear((*m)[op.off:end])
	}
}

// TestKillDashNine runs a child process that writes to a store (appends
// with odd lengths, so that blocks are appended to while partly full, and
// some in-place overwrites) and punches ranges of it (Punch, durable when
// answered), printing each operation before it starts and after it is
// acknowledged (synced). The parent kills it with SIGKILL, reopens the
// store and checks every acknowledged byte; bytes of an operation that
// was in flight must read as before or after it, never anything else.
func TestKillDashNine(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillDashNine$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	var acked atomic.Int64
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.HasPrefix(sc.Text(), "ack") {
				acked.Add(1)
			}
		}
	}()
	// Kill it mid-stream: after 1.2 s, and not before it acknowledged a
	// fair number of writes (a loaded machine runs the child slowly).
	time.Sleep(1200 * time.Millisecond)
	for deadline := time.Now().Add(60 * time.Second); acked.Load() < 40 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-readDone
	cmd.Wait()

	// Replay: per chunk, the acknowledged writes in order give the
	// expected content; the write in flight (started, not acknowledged)
	// may or may not have happened.
	type chunkState struct {
		want     model
		inFlight *crashOp
	}
	chunks := map[ID]*chunkState{}
	acks, punches := 0, 0
	for _, line := range lines {
		var op crashOp
		var kind string
		if _, err := fmt.Sscanf(line, "%s %d %d %d %d %d", &kind, &op.id.Ino, &op.id.Slot, &op.off, &op.n, &op.seed); err != nil {
			t.Fatalf("bad line %q from the child: %v", line, err)
		}
		cs := chunks[op.id]
		if cs == nil {
			cs = &chunkState{}
			chunks[op.id] = cs
		}
		switch kind {
		case "start":
			cs.inFlight = &op
		case "ack":
			op.apply(&cs.want)
			cs.inFlight = nil
			acks++
			if op.seed == 0 {
				punches++
			}
		}
	}
	if acks < 20 {
		t.Fatalf("the child acknowledged only %d writes before it was killed", acks)
	}
	s := openStore(t, dir)
	for id, cs := range chunks {
		maxLen := len(cs.want)
		var newer model
		if f := cs.inFlight; f != nil {
			newer = model(bytes.Clone(cs.want))
			f.apply(&newer)
			maxLen = len(newer)
		}
		got, clen := mustRead(t, s, id, 0, maxLen+BlockSize)
		if clen < int64(len(cs.want)) {
			t.Errorf("%v: length %d, shorter than the %d acknowledged bytes", id, clen, len(cs.want))
			continue
		}
		for i := range cs.want {
			if got[i] == cs.want[i] {
				continue
			}
			if newer != nil && got[i] == newer[i] && int64(i) >= cs.inFlight.off && int64(i) < cs.inFlight.off+cs.inFlight.n {
				continue
			}
			t.Errorf("%v: byte %d is %#x, acknowledged %#x (in flight: %+v)", id, i, got[i], cs.want[i], cs.inFlight)
			break
		}
	}
	t.Logf("verified %d acknowledged writes and punches (%d punches) in %d chunks; %d corruptions", acks, punches, len(chunks), s.Corruptions())
	if s.Corruptions() != 0 {
		t.Errorf("%d corruptions after kill -9", s.Corruptions())
	}
}

func crashChild(dir string) {
	s, err := Open(dir, Options{Target: testTarget, Logger: quietLogger(), MaxOpenChunks: 3})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	say := func(kind string, op crashOp) {
		mu.Lock()
		defer mu.Unlock()
		// One write(2) per line, so a kill cannot leave half a line.
		os.Stdout.Write(fmt.Appendf(nil, "%s %d %d %d %d %d\n", kind, op.id.Ino, op.id.Slot, op.off, op.n, op.seed))
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			id := ID{Ino: uint64(w + 1), Slot: uint32(w)}
			var length int64
			for {
				op := crashOp{id: id, seed: r.Uint64() | 1}
				op.n = 1 + r.Int64N(3*BlockSize/2)
				op.off = length
				if length > 0 && r.IntN(4) == 0 {
					op.off = r.Int64N(length) // in-place overwrite
				}
				if length > 0 && r.IntN(6) == 0 {
					// A punch of whole blocks and partial ones.
					op.seed, op.off, op.n = 0, r.Int64N(length), 1+r.Int64N(3*BlockSize)
					say("start", op)
					if err := s.Punch(id, op.off, op.n); err != nil {
						fmt.Fprintln(os.Stderr, "child: punch:", err)
						os.Exit(2)
					}
					say("ack", op)
					continue
				}
				say("start", op)
				sync := r.IntN(2) == 0
				if err := s.WriteAt(id, op.off, pattern(op.seed, int(op.n)), sync); err != nil {
					fmt.Fprintln(os.Stderr, "child: write:", err)
					os.Exit(2)
				}
				if !sync {
					if err := s.Sync(id); err != nil {
						fmt.Fprintln(os.Stderr, "child: sync:", err)
						os.Exit(2)
					}
				}
				say("ack", op)
				length = max(length, op.off+op.n)
			}
		})
	}
	wg.Wait()
}
