package fusefs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func statusText(pnd, shd, blk, ign, cgt uint64) []byte {
	return fmt.Appendf(nil, "Name:\tcat\nState:\tS (sleeping)\nSigQ:\t1/9999\nSigPnd:\t%016x\nShdPnd:\t%016x\nSigBlk:\t%016x\nSigIgn:\t%016x\nSigCgt:\t%016x\nCapInh:\t0\n", pnd, shd, blk, ign, cgt)
}

func sig(s unix.Signal) uint64 { return 1 << (uint(s) - 1) }

func TestStopSignalPending(t *testing.T) {
	goCaught := sig(unix.SIGURG) | sig(unix.SIGCHLD) | sig(unix.SIGINT) | sig(unix.SIGPROF) | sig(unix.SIGWINCH) | sig(unix.SIGALRM)
	for _, c := range []struct {
		name                    string
		pnd, shd, blk, ign, cgt uint64
		want                    bool
	}{
		{"nothing pending", 0, 0, 0, 0, 0, false},
		{"SIGINT, default action (cat)", 0, sig(unix.SIGINT), 0, 0, 0, true},
		{"SIGINT caught (Python, Go)", sig(unix.SIGINT), 0, 0, 0, goCaught, true},
		{"SIGTERM caught", 0, sig(unix.SIGTERM), 0, 0, goCaught | sig(unix.SIGTERM), true},
		{"SIGKILL", sig(unix.SIGKILL), 0, 0, 0, 0, true},
		{"SIGKILL cannot be blocked", sig(unix.SIGKILL), 0, ^uint64(0), 0, 0, true},
		{"SIGINT blocked", 0, sig(unix.SIGINT), sig(unix.SIGINT), 0, 0, false},
		{"Go runtime preemption (SIGURG caught)", sig(unix.SIGURG), 0, 0, 0, goCaught, false},
		{"SIGCHLD of a child", 0, sig(unix.SIGCHLD), 0, 0, goCaught, false},
		{"SIGCHLD, default action", 0, sig(unix.SIGCHLD), 0, 0, 0, false},
		{"SIGWINCH", 0, sig(unix.SIGWINCH), 0, 0, 0, false},
		{"SIGALRM caught", sig(unix.SIGALRM), 0, 0, 0, goCaught, false},
		{"SIGALRM, default action kills", sig(unix.SIGALRM), 0, 0, 0, 0, true},
		{"SIGUSR1 ignored", sig(unix.SIGUSR1), 0, 0, sig(unix.SIGUSR1), 0, false},
		{"SIGPIPE, default action kills", 0, sig(unix.SIGPIPE), 0, 0, 0, true},
	} {
		if got := stopSignalPending(statusText(c.pnd, c.shd, c.blk, c.ign, c.cgt)); got != c.want {
			t.Errorf("%s: stopSignalPending = %v, want %v", c.name, got, c.want)
		}
	}
	if !stopSignalPending([]byte("Name:\tx\n")) {
		t.Error("a status without signal lines must count as stopping")
	}
	if !stopSignalPending([]byte("SigPnd:\tzz\nShdPnd:\t0\nSigBlk:\t0\nSigIgn:\t0\nSigCgt:\t0\n")) {
		t.Error("an unreadable mask must count as stopping")
	}
}

func TestOpInterrupt(t *testing.T) {
	t.Parallel()
	fs := newFileSystem(context.Background(), nil, &Options{OpTimeout: time.Minute})

	// An interrupt before the watch starts is seen when it starts; pid 0
	// (another PID namespace) counts as a stopping caller.
	intr := make(chan struct{})
	close(intr)
	ctx, cancel := fs.op(intr, 0)
	defer cancel()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("an interrupted operation was not cancelled")
	}
	if context.Cause(ctx) != errInterrupted {
		t.Errorf("cause %v, want errInterrupted", context.Cause(ctx))
	}

	// Without an interrupt the operation runs on until it ends.
	ctx, cancel = fs.op(make(chan struct{}), 0)
	time.Sleep(2 * interruptWait)
	if ctx.Err() != nil {
		t.Fatalf("an operation without an interrupt was cancelled: %v", context.Cause(ctx))
	}
	cancel()
	if context.Cause(ctx) == errInterrupted {
		t.Error("an operation that ended counts as interrupted")
	}
}

// BenchmarkOp measures the context every operation starts with.
func BenchmarkOp(b *testing.B) {
	fs := newFileSystem(context.Background(), nil, &Options{OpTimeout: time.Minute})
	intr := make(chan struct{})
	for _, c := range []struct {
		name string
		intr <-chan struct{}
	}{{"changes", nil}, {"interruptible", intr}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, cancel := fs.op(c.intr, 1)
				cancel()
			}
		})
	}
}
