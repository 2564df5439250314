package fuse

import (
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// memFSEnv, when set, makes the test binary serve memFS on the mountpoint
// it names until SIGTERM. The benchmarks mount it beside Sluice: the same
// requests answered from memory, with no metadata service, no storage and
// no client library, are the floor of what a FUSE request costs on the
// machine, whatever the server behind it does.
const memFSEnv = "SLUICE_FUSE_MEMFS"

// memFS is a minimal in-memory file system on go-fuse's raw API: files
// hold a size and read as zeros. It answers what the small-file benchmark
// asks (lookup, getattr, mkdir, create, open, read, write, unlink, rmdir,
// readdir) with the Sluice mount's timeouts and open flags.
type memFS struct {
	fuse.RawFileSystem
	mu    sync.Mutex
	nodes map[uint64]*memNode
	next  uint64
}

type memNode struct {
	attr fuse.Attr
	kids map[string]uint64 // of a directory
}

func (m *memFS) entry(n *memNode, out *fuse.EntryOut) {
	out.NodeId = n.attr.Ino
	out.Generation = 1
	out.SetEntryTimeout(time.Second)
	out.SetAttrTimeout(time.Second)
	out.Attr = n.attr
}

func (m *memFS) Lookup(_ <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.nodes[h.NodeId].kids[name]
	if !ok {
		*out = fuse.EntryOut{}
		out.SetEntryTimeout(time.Second) // a negative entry, as the mount's
		return fuse.OK
	}
	m.entry(m.nodes[ino], out)
	return fuse.OK
}

func (m *memFS) GetAttr(_ <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.nodes[in.NodeId]
	if n == nil {
		return fuse.ENOENT
	}
	out.Attr = n.attr
	out.SetTimeout(time.Second)
	return fuse.OK
}

func (m *memFS) add(parent uint64, name string, mode uint32, h *fuse.InHeader) *memNode {
	m.next++
	n := &memNode{attr: fuse.Attr{Ino: m.next, Mode: mode, Nlink: 1, Blksize: 1 << 20, Owner: h.Owner}}
	if mode&syscall.S_IFDIR != 0 {
		n.attr.Nlink = 2
		n.kids = make(map[string]uint64)
	}
	m.nodes[n.attr.Ino] = n
	m.nodes[parent].kids[name] = n.attr.Ino
	return n
}

func (m *memFS) Mkdir(_ <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entry(m.add(in.NodeId, name, syscall.S_IFDIR|in.Mode&0o7777, &in.InHeader), out)
	return fuse.OK
}

func (m *memFS) Create(_ <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entry(m.add(in.NodeId, name, syscall.S_IFREG|in.Mode&0o7777, &in.InHeader), &out.EntryOut)
	return fuse.OK
}

func (m *memFS) Open(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.Flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		out.OpenFlags = fuse.FOPEN_NOFLUSH
	}
	return fuse.OK
}

func (m *memFS) Write(_ <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := &m.nodes[in.NodeId].attr
	a.Size = max(a.Size, in.Offset+uint64(len(data)))
	return uint32(len(data)), fuse.OK
}

func (m *memFS) Read(_ <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	m.mu.Lock()
	size := m.nodes[in.NodeId].attr.Size
	m.mu.Unlock()
	n := uint64(0)
	if in.Offset < size {
		n = min(uint64(in.Size), size-in.Offset)
	}
	clear(buf[:n])
	return fuse.ReadResultData(buf[:n]), fuse.OK
}

func (m *memFS) SetAttr(_ <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := &m.nodes[in.NodeId].attr
	if size, ok := in.GetSize(); ok {
		a.Size = size
	}
	if mode, ok := in.GetMode(); ok {
		a.Mode = a.Mode&syscall.S_IFMT | mode&0o7777
	}
	out.Attr = *a
	out.SetTimeout(time.Second)
	return fuse.OK
}

func (m *memFS) remove(parent uint64, name string) fuse.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	kids := m.nodes[parent].kids
	ino, ok := kids[name]
	if !ok {
		return fuse.ENOENT
	}
	delete(kids, name)
	delete(m.nodes, ino)
	return fuse.OK
}

func (m *memFS) Unlink(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return m.remove(h.NodeId, name)
}

func (m *memFS) Rmdir(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return m.remove(h.NodeId, name)
}

func (m *memFS) Flush(<-chan struct{}, *fuse.FlushIn) fuse.Status { return fuse.OK }

func (m *memFS) Release(<-chan struct{}, *fuse.ReleaseIn) {}

func (m *memFS) OpenDir(<-chan struct{}, *fuse.OpenIn, *fuse.OpenOut) fuse.Status { return fuse.OK }

func (m *memFS) ReleaseDir(*fuse.ReleaseIn) {}

// ReadDir lists a directory in one reply (enough for os.RemoveAll of the
// benchmark's directories, which it empties in rounds).
func (m *memFS) ReadDir(_ <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if in.Offset > 0 {
		return fuse.OK
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	off := uint64(0)
	for name, ino := range m.nodes[in.NodeId].kids {
		off++
		if !out.AddDirEntry(fuse.DirEntry{Name: name, Ino: ino, Mode: m.nodes[ino].attr.Mode, Off: off}) {
			break
		}
	}
	return fuse.OK
}

// runMemFS serves memFS on mp until SIGTERM or SIGINT.
func runMemFS(mp string) int {
	m := &memFS{RawFileSystem: fuse.NewDefaultRawFileSystem(), next: fuse.FUSE_ROOT_ID,
		nodes: map[uint64]*memNode{fuse.FUSE_ROOT_ID: {
			attr: fuse.Attr{Ino: fuse.FUSE_ROOT_ID, Mode: syscall.S_IFDIR | 0o755, Nlink: 2},
			kids: make(map[string]uint64),
		}}}
	// The Sluice mount's options (internal/fusefs/mount.go); READDIRPLUS
	// off, which only the untimed clean-up uses.
	srv, err := fuse.NewServer(m, mp, &fuse.MountOptions{
		AllowOther: true, Options: []string{"default_permissions"}, Name: "memfs", FsName: "memfs",
		MaxWrite: 1 << 20, MaxReadAhead: 1 << 20, MaxBackground: 64, IgnoreSecurityLabels: true,
		ExplicitDataCacheControl: true, DisableSplice: true, DirectMount: true, DisableReadDirPlus: true,
		ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2,
	})
	if err != nil {
		os.Stderr.WriteString("memfs: " + err.Error() + "\n")
		return 1
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		os.Stderr.WriteString("memfs: " + err.Error() + "\n")
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	if err := srv.Unmount(); err != nil {
		syscall.Unmount(mp, syscall.MNT_DETACH)
	}
	return 0
}

// startMemFS mounts memFS on a new mountpoint, served by this test binary
// in a child process, stopped and unmounted when the test ends.
func startMemFS(t *testing.T) string {
	t.Helper()
	mp := newMountpoint(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), memFSEnv+"="+mp)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		for i := 0; memFSMounted(mp) && i < 50; i++ {
			syscall.Unmount(mp, syscall.MNT_DETACH)
			time.Sleep(20 * time.Millisecond)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); !memFSMounted(mp); time.Sleep(10 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("memfs exited before mounting: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("memfs did not mount in 10s: %s", logs.String())
		}
	}
	return mp
}

func memFSMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMount(f[4]) == dir && strings.Contains(line, "fuse.memfs") {
			return true
		}
	}
	return false
}
