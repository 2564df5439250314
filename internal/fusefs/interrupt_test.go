package fusefs

import (
	"fmt"
	"testing"

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
