package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Temporary files (docs/s3.md, "Consistency"): every upload streams into
// /<bucket>/.sluice-s3/tmp/<name> and renames it over its key, or removes
// it when it fails. A gateway killed meanwhile leaves the file behind; the
// gateway collects such files when it starts and every TempSweepEvery.
//
// A temporary file's name says who made it:
//
//	<node>.<pid>.<random>
//
// node identifies the kernel boot and PID namespace of the gateway process
// (so that a pid means the same process there) and pid is its process ID.
// A file is abandoned when
//
//   - this gateway does not use it (it keeps the set of the temporary
//     files in use), and
//   - its maker is dead: same node, another pid, and no such process; or
//     it was not written for TempGrace (gateways on other nodes, whose
//     processes cannot be checked, and names of older gateways).
//
// A live upload rewrites its file's mtime at every flush, so the grace
// only has to exceed a stall of a live upload on another node.

// tempMaker is who made a temporary file, parsed from its name.
type tempMaker struct {
	node string
	pid  int
}

// tempPrefix is the start of the names of temporary files m makes.
func (m tempMaker) tempPrefix() string {
	return m.node + "." + strconv.Itoa(m.pid) + "."
}

// parseTempName returns the maker of a temporary file (false for names of
// another form, such as those of older gateways).
func parseTempName(name string) (tempMaker, bool) {
	parts := strings.Split(name, ".")
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return tempMaker{}, false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return tempMaker{}, false
	}
	return tempMaker{node: parts[0], pid: pid}, true
}

// abandonedTemp decides whether temporary file name, last written at
// mtime, may be removed by gateway self: inUse says self uses it, alive
// whether a process of self's node is running.
func abandonedTemp(name string, mtime, now time.Time, grace time.Duration, self tempMaker, inUse bool, alive func(pid int) bool) bool {
	if inUse {
		return false
	}
	if now.Sub(mtime) > grace {
		return true
	}
	m, ok := parseTempName(name)
	if !ok || self.node == "" || m.node != self.node || m.pid == self.pid {
		// Another node (or an unknown maker) cannot be checked; this
		// process's own files are its uploads' to remove.
		return false
	}
	return !alive(m.pid)
}

// nodeID identifies the kernel boot and PID namespace of this process: two
// processes with the same nodeID share one PID space. "" if unknown.
func nodeID() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	s := sha256.Sum256([]byte(strings.TrimSpace(string(boot)) + "/" + ns))
	return hex.EncodeToString(s[:6])
}

// processAlive reports whether a process with this pid exists (in this
// PID namespace).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// temps is the gateway's record of the temporary files it uses.
type temps struct {
	self tempMaker
	mu   sync.Mutex
	used map[string]struct{} // paths; guarded by mu
}

func newTemps() *temps {
	return &temps{
		self: tempMaker{node: nodeID(), pid: os.Getpid()},
		used: make(map[string]struct{}),
	}
}

// path returns a new temporary path in bucket and records it as used.
func (t *temps) path(bucket string) string {
	p := "/" + bucket + "/" + hiddenDir + "/tmp/" + t.self.tempPrefix() + randomHex(12)
	t.mu.Lock()
	t.used[p] = struct{}{}
	t.mu.Unlock()
	return p
}

// done records that temporary path p is no longer used (renamed or
// removed).
func (t *temps) done(p string) {
	t.mu.Lock()
	delete(t.used, p)
	t.mu.Unlock()
}

func (t *temps) inUse(p string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.used[p]
	return ok
}

// collectTemps removes the abandoned temporary files of every bucket and
// returns how many it removed.
func (g *Gateway) collectTemps(ctx context.Context) (int, error) {
	now := g.now()
	removed := 0
	for e, err := range g.c.ReadDir(ctx, "/") {
		if err != nil {
			return removed, err
		}
		if !e.Mode.IsDir() || !validBucketName(e.Name) {
			continue
		}
		dir := "/" + e.Name + "/" + hiddenDir + "/tmp"
		for te, err := range g.c.ReadDir(ctx, dir) {
			if err != nil {
				if c := errs.CodeOf(err); c != errs.NotFound && c != errs.NotDir {
					g.log.Warn("s3: cannot list temporary files", "dir", dir, "err", err)
				}
				break
			}
			p := dir + "/" + te.Name
			fi, err := g.c.Lstat(ctx, p)
			if err != nil {
				continue // renamed or removed meanwhile
			}
			if !abandonedTemp(te.Name, fi.ModTime(), now, g.opts.TempGrace, g.temps.self, g.temps.inUse(p), processAlive) {
				continue
			}
			if err := g.c.Remove(ctx, p); err != nil {
				if !isNotExist(err) {
					g.log.Warn("s3: cannot remove an abandoned temporary file", "path", p, "err", err)
				}
				continue
			}
			removed++
		}
		if ctx.Err() != nil {
			return removed, ctx.Err()
		}
	}
	return removed, nil
}

// collectTempsLoop collects abandoned temporary files now and every
// TempSweepEvery until ctx ends.
func (g *Gateway) collectTempsLoop(ctx context.Context) {
	tick := time.NewTicker(g.opts.TempSweepEvery)
	defer tick.Stop()
	for {
		n, err := g.collectTemps(ctx)
		if err != nil && ctx.Err() == nil {
			g.log.Warn("s3: collecting abandoned temporary files failed", "err", err)
		}
		if n > 0 {
			g.log.Info("s3: removed abandoned temporary files (of uploads interrupted by a gateway that stopped)", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
