package fusefs

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel interrupts a FUSE request whenever its caller gets a signal
// it catches or that kills it: Ctrl-C, but also a Go runtime's SIGURG,
// SIGCHLD of a finished child, SIGWINCH. Answering EINTR to every such
// interrupt would hand programs EINTR from stat or read, which local file
// systems never return. So an interrupted operation stops only when the
// caller has a signal pending that is meant to stop it (see
// stopSignalPending); otherwise it goes on, watching for one.

// stopSignals are the signals a user sends to stop a program; an
// interrupt is honoured for them even if the program catches them (a
// Python program turns SIGINT into KeyboardInterrupt and retries an EINTR
// only after its handlers ran).
const stopSignals = 1<<(unix.SIGHUP-1) | 1<<(unix.SIGINT-1) | 1<<(unix.SIGQUIT-1) | 1<<(unix.SIGTERM-1) | 1<<(unix.SIGKILL-1)

// harmless are the signals whose default action does not end a process.
const harmless = 1<<(unix.SIGCHLD-1) | 1<<(unix.SIGCONT-1) | 1<<(unix.SIGSTOP-1) | 1<<(unix.SIGTSTP-1) |
	1<<(unix.SIGTTIN-1) | 1<<(unix.SIGTTOU-1) | 1<<(unix.SIGURG-1) | 1<<(unix.SIGWINCH-1)

// stopSignalPending decides, from a /proc/PID/status text, whether the
// process has a signal pending that will stop it or that a user sent to
// stop it: a stop signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGKILL), or
// any signal whose default action ends the process and that it neither
// catches nor ignores. Blocked signals do not count (SIGKILL cannot be
// blocked). A text without the signal lines counts as stopping: the
// interrupt is then taken at its word.
func stopSignalPending(status []byte) bool {
	var pnd, shd, blk, ign, cgt uint64
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch k {
		case "SigPnd":
			dst = &pnd
		case "ShdPnd":
			dst = &shd
		case "SigBlk":
			dst = &blk
		case "SigIgn":
			dst = &ign
		case "SigCgt":
			dst = &cgt
		default:
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return true
		}
		*dst = n
		seen++
	}
	if seen < 5 {
		return true
	}
	pending := (pnd | shd) &^ (blk &^ (1 << (unix.SIGKILL - 1)))
	if pending&stopSignals != 0 {
		return true
	}
	return pending&^ign&^cgt&^harmless != 0
}

// callerStopping reports whether process pid has a stop signal pending
// (true when it cannot tell: pid 0 from another PID namespace, or the
// process is gone).
func callerStopping(pid uint32) bool {
	if pid == 0 {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return true
	}
	return stopSignalPending(b)
}

// interruptPoll is how often an interrupted operation whose caller had no
// stop signal pending looks again: the kernel interrupts a request once,
// so a Ctrl-C after a harmless signal brings no second interrupt.
const interruptPoll = 100 * time.Millisecond

// interruptWait is how long an interruptible operation runs before
// anything watches for its interrupt (see fileSystem.op): short beside a
// user's reaction to a blocked program, long beside a normal operation.
const interruptWait = 20 * time.Millisecond
