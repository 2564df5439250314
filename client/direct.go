package client

import (
	"container/list"
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-fs/sluice/internal/chunk"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Direct reads (docs/adr/0025-direct-reads.md): with Options.DirectRead, a
// client on the machine of a storage service reads the chunks of
// unreplicated chains from their files, with descriptors the service
// passes over its Unix socket (DATA/direct.sock), and checks every block
// against its checksum itself: no request, no copy through the server.
// Anything it cannot verify, and every other read, goes through the
// network as before.

// EnvDirectRead, set to 1, turns direct reads on for clients whose
// Options do not (a contract: scripts and job launchers set it).
const EnvDirectRead = "SLUICE_DIRECT_READ"

// directRetry is how long a client waits before it asks a storage service
// for its socket again after the socket failed (a restarted service makes
// a new one).
const directRetry = 10 * time.Second

// directMinChunk is the least a chunk must hold (by the file's size) for
// its files to be opened for direct reading at its File's first read of
// it; a smaller chunk's are opened at the second read. Opening costs a
// request to the service (measured, files read once through the library,
// 2026-11-28: 4 KiB files 10% slower with direct reads, 16 KiB ones 5-33%
// faster, 64 KiB ones 22-32%), and a File that reads a chunk again
// (random reads of a sample, a model's tensors) gets the rest of its
// reads without any request.
const directMinChunk = 16 << 10

// directPeer is the Unix socket of one storage service (by address).
//
// The store keeps the files of the chunks it handed out from being
// recycled for other chunks only while its process lives (ADR 0024): a
// restarted service knows nothing of the descriptors clients hold. So
// each peer keeps a second, idle connection that it only reads, which
// ends when the service's process does; gen then moves on, and every
// chunk opened under the old gen is dropped at its next read (the check
// runs before and after each read, so a read that overlapped the end is
// dropped too). A new process takes far longer to start and remove a
// chunk than the end of the old one takes to reach the client.
//
// Requests go over up to directConns connections at once, one request
// each at a time: a cold chunk's open on the service waits for the disk,
// and one connection made the reads of a batch wait for each other's.
type directPeer struct {
	gen  atomic.Uint64 // moves on when the service's process is gone
	sem  chan struct{} // a slot per request in flight
	addr *net.UnixAddr

	mu       sync.Mutex
	idle     []*net.UnixConn // request connections not in use
	watch    *net.UnixConn   // idle: ends with the service's process; nil: unusable now
	failedAt time.Time       // when the socket was last found unusable
	tried    bool
}

// directConns is the most requests a client has in flight to one
// service's socket.
const directConns = 8

// directFile is a chunk a File reads directly, opened under a peer's gen.
type directFile struct {
	r    *chunk.DirectReader
	peer *directPeer
	gen  uint64
	f    *File
	k    directKey
	elem *list.Element // in the client's directLRU; guarded by its mu
}

// directLRU bounds the chunks whose files a client holds open for direct
// reads, across its Files (Options.DirectReadMaxChunks): a File kept open
// for every sample of a data set (the Python client's file sets) would
// otherwise hold two descriptors per sample until the process ran out.
// Lock order: a File's dmu, then mu.
type directLRU struct {
	mu   sync.Mutex
	max  int
	list list.List // *directFile, the most recently read first
}

// defaultDirectMaxChunks is a quarter of the process's descriptor limit
// in chunks (two descriptors each), between 16 and 4,096.
func defaultDirectMaxChunks() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 4096
	}
	return int(min(max(rl.Cur/8, 16), 4096))
}

// added enters d, just opened, and returns the chunks to close to stay
// within the bound (the least recently read).
func (l *directLRU) added(d *directFile) []*directFile {
	l.mu.Lock()
	defer l.mu.Unlock()
	d.elem = l.list.PushFront(d)
	var out []*directFile
	for l.list.Len() > max(l.max, 1) {
		e := l.list.Back()
		v := l.list.Remove(e).(*directFile)
		v.elem = nil
		out = append(out, v)
	}
	return out
}

// used marks d as read just now.
func (l *directLRU) used(d *directFile) {
	l.mu.Lock()
	if d.elem != nil {
		l.list.MoveToFront(d.elem)
	}
	l.mu.Unlock()
}

// forget takes d out (its File closed it).
func (l *directLRU) forget(d *directFile) {
	l.mu.Lock()
	if d.elem != nil {
		l.list.Remove(d.elem)
		d.elem = nil
	}
	l.mu.Unlock()
}

// held is the number of chunks held open.
func (l *directLRU) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.list.Len()
}

// DirectReadChunksHeld is the number of chunks whose files the client
// holds open for direct reads now (at most Options.DirectReadMaxChunks).
func (c *Client) DirectReadChunksHeld() int { return c.dlru.held() }

// live reports whether the service that opened d's files still runs.
func (d *directFile) live() bool { return d.peer.gen.Load() == d.gen }

// lostLocked closes the peer's connections and moves its gen on (the
// connections of requests in flight are closed when they come back). p.mu
// must be held.
func (p *directPeer) lostLocked() {
	p.gen.Add(1)
	for _, c := range p.idle {
		c.Close()
	}
	if p.watch != nil {
		p.watch.Close()
	}
	p.idle, p.watch, p.failedAt = nil, nil, time.Now()
}

// getConn returns a connection for one request, and the gen it was taken
// under; it waits while directConns requests are in flight.
func (p *directPeer) getConn() (*net.UnixConn, uint64, error) {
	p.sem <- struct{}{}
	p.mu.Lock()
	if p.watch == nil {
		p.mu.Unlock()
		<-p.sem
		return nil, 0, errs.New(errs.Unavailable, "client: no direct socket")
	}
	gen := p.gen.Load()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, gen, nil
	}
	p.mu.Unlock()
	c, err := net.DialUnix("unixpacket", nil, p.addr)
	if err != nil {
		<-p.sem
		p.lost(gen)
		return nil, 0, err
	}
	return c, gen, nil
}

// putConn gives back a connection taken under gen: kept for the next
// request if the peer is still that gen, else closed; nil: it failed.
func (p *directPeer) putConn(c *net.UnixConn, gen uint64) {
	p.mu.Lock()
	if c != nil && p.watch != nil && p.gen.Load() == gen {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
	<-p.sem
}

// lost gives the peer up if it is still at gen.
func (p *directPeer) lost(gen uint64) {
	p.mu.Lock()
	if p.watch != nil && p.gen.Load() == gen {
		p.lostLocked()
	}
	p.mu.Unlock()
}

// watchEnd waits for the service to close w (its process ended, or it
// stopped serving direct reads, or the client closed w).
func (p *directPeer) watchEnd(w *net.UnixConn) {
	// The service never writes on it: any return (an error, or the
	// zero-length read that ends a SOCK_SEQPACKET connection) is the end.
	var b [1]byte
	w.ReadMsgUnix(b[:], nil)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watch == w {
		p.lostLocked()
	}
}

// directKey names a chunk a File reads directly.
type directKey struct {
	target placement.TargetID
	data   uint64
	slot   uint32
}

// directPeerFor returns the socket of target t's service, asking the
// service for it the first time (and again directRetry after a failure);
// nil when direct reads are not possible.
func (c *Client) directPeerFor(ctx context.Context, t placement.TargetID) *directPeer {
	addr := c.targetAddr(t)
	if addr == "" {
		return nil
	}
	c.dmu.Lock()
	p := c.dpeers[addr]
	if p == nil {
		p = &directPeer{sem: make(chan struct{}, directConns)}
		c.dpeers[addr] = p
	}
	c.dmu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watch != nil {
		return p
	}
	if p.tried && time.Since(p.failedAt) < directRetry {
		return nil
	}
	p.tried, p.failedAt = true, time.Now()
	conn, err := c.targetConn(ctx, t)
	if err != nil || conn.InProcess() {
		// A client in the storage service's own process (the mount and
		// the gateway of sluice serve) calls the targets without a
		// socket: that costs less than opening a chunk's files for each
		// File (measured: 64 KiB files read through serve --mount at
		// 0.24-0.29 of a local directory with direct reads, 0.38-0.42
		// without).
		return nil
	}
	var info wire.DirectInfoResp
	if _, err := conn.Call(ctx, wire.OpDirectInfo, &wire.Empty{}, nil, &info, nil); err != nil {
		return nil // an older service, or none now
	}
	if info.Socket == "" || info.Boot == "" || info.Boot != c.boot {
		return nil // another machine (or no socket)
	}
	sock := &net.UnixAddr{Name: info.Socket, Net: "unixpacket"}
	uc, err := net.DialUnix("unixpacket", nil, sock)
	if err != nil {
		return nil // another mount namespace, or not ours to use
	}
	w, err := net.DialUnix("unixpacket", nil, sock)
	if err != nil {
		uc.Close()
		return nil
	}
	p.addr, p.idle, p.watch = sock, append(p.idle, uc), w
	go p.watchEnd(w)
	return p
}

// open asks the service for chunk (t, data, slot)'s files; the reader
// belongs to the peer's gen it returns.
func (p *directPeer) open(t placement.TargetID, data uint64, slot uint32) (*chunk.DirectReader, uint64, error) {
	resp, files, gen, err := p.ask(&wire.DirectOpenReq{Target: t, Ino: data, Slot: slot}, func(r *wire.DirectOpenResp, n int) bool {
		return (r.Code == 0) == (n == 2)
	})
	if err != nil {
		return nil, 0, err
	}
	if resp.Code != 0 {
		return nil, 0, errs.New(errs.Code(resp.Code), "%s", resp.Msg)
	}
	return chunk.NewDirectReader(files[0], files[1]), gen, nil
}

// ask sends req on one of p's connections and returns the answer, the
// descriptors it carried and the peer's gen. An exchange that breaks, or
// an answer that fails valid (given the answer and its number of
// descriptors), drops the connection and the peer's gen and is an error.
func (p *directPeer) ask(req *wire.DirectOpenReq, valid func(r *wire.DirectOpenResp, files int) bool) (wire.DirectOpenResp, []*os.File, uint64, error) {
	var resp wire.DirectOpenResp
	conn, gen, err := p.getConn()
	if err != nil {
		return resp, nil, 0, err
	}
	fail := func(err error) (wire.DirectOpenResp, []*os.File, uint64, error) {
		p.putConn(nil, gen)
		conn.Close()
		p.lost(gen)
		return resp, nil, 0, err
	}
	if _, _, err := conn.WriteMsgUnix(wire.Marshal(req), nil, nil); err != nil {
		return fail(err)
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(2*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return fail(err)
	}
	files, ferr := receivedFiles(oob[:oobn])
	if err := wire.Unmarshal(buf[:n], &resp); err != nil || ferr != nil || !valid(&resp, len(files)) {
		for _, f := range files {
			f.Close()
		}
		return fail(errs.New(errs.Protocol, "client: malformed direct-read answer (%v, %v, %d descriptors)", err, ferr, len(files)))
	}
	p.putConn(conn, gen)
	return resp, files, gen, nil
}

// receivedFiles returns the descriptors passed in a message's control
// data.
func receivedFiles(oob []byte) ([]*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "chunk"))
		}
	}
	return files, nil
}

// readDirect reads p at off of chunk (t, data, slot) from its files: the
// bytes the chunk holds there (fewer than len(p) where it ends) and true,
// or false when the read must go through the network; paced says that the
// read's bytes already waited for the job's buckets (the network read
// that follows must not wait for them again). chunkSize is what the chunk
// holds by the file's size as the File knows it.
func (f *File) readDirect(ctx context.Context, t placement.TargetID, data uint64, slot uint32, off int64, p []byte, chunkSize int64) (n int, ok, paced bool) {
	k := directKey{t, data, slot}
	f.dmu.Lock()
	d := f.direct[k]
	f.dmu.Unlock()
	if d != nil && !d.live() {
		f.dropDirect(k, d)
		d = nil
	}
	if d == nil {
		f.dmu.Lock()
		if f.directSeen == nil {
			f.directSeen = map[directKey]bool{}
		}
		first := !f.directSeen[k]
		f.directSeen[k] = true
		f.dmu.Unlock()
		if first && chunkSize < directMinChunk {
			return 0, false, false
		}
		peer := f.c.directPeerFor(ctx, t)
		if peer == nil {
			return 0, false, false
		}
		r, gen, err := peer.open(t, data, slot)
		if err != nil {
			return 0, false, false // a missing chunk, or no socket: the targets answer
		}
		d = &directFile{r: r, peer: peer, gen: gen, f: f, k: k}
		var victims []*directFile
		f.dmu.Lock()
		if f.direct == nil {
			f.direct = map[directKey]*directFile{}
		}
		if old := f.direct[k]; old != nil {
			r.Close() // another read opened it meanwhile
			d = old
		} else {
			f.direct[k] = d
			victims = f.c.dlru.added(d)
		}
		f.dmu.Unlock()
		for _, v := range victims {
			v.f.dropDirect(v.k, v)
		}
	} else {
		f.c.dlru.used(d)
	}
	if f.c.pace != nil {
		if err := f.c.pace.wait(ctx, f.c.targetAddr(t), len(p)); err != nil {
			return 0, false, false
		}
		paced = true
	}
	n, _, err := d.r.ReadAt(p, off)
	if err != nil || !d.live() {
		// Removed, a block that only the store can judge, or the
		// service's process ended (its successor may recycle the files):
		// forget the files (a later read opens the chunk's files anew).
		f.dropDirect(k, d)
		return 0, false, paced
	}
	f.c.directBytes.Add(uint64(n))
	return n, true, paced
}

// dropDirect forgets and closes the files of chunk k if d still holds them.
func (f *File) dropDirect(k directKey, d *directFile) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if f.direct[k] == d {
		delete(f.direct, k)
		f.c.dlru.forget(d)
		d.r.Close()
	}
}

// closeDirect closes the chunks' files of the File's direct reads.
func (f *File) closeDirect() {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	for k, d := range f.direct {
		f.c.dlru.forget(d)
		d.r.Close()
		delete(f.direct, k)
	}
}

// DirectReadBytes is how many bytes this client read straight from chunk
// files (Options.DirectRead).
func (c *Client) DirectReadBytes() uint64 { return c.directBytes.Load() }

// closeDirectPeers closes the client's direct sockets.
func (c *Client) closeDirectPeers() {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	for _, p := range c.dpeers {
		p.mu.Lock()
		p.lostLocked()
		p.mu.Unlock()
	}
}

// OpenChunkData returns a read-only file of the data of chunk (ino, slot)
// of chain, checked whole against its checksums by the storage service
// that holds it on this machine, and the chunk's length: for FUSE
// passthrough in a mount that is not in that service's process
// (fusefs.LocalData; `sluice mount --passthrough`). It needs
// Options.DirectRead and an unreplicated chain held on this machine; else
// it fails with errs.NotSupported. The service marks the file so that it
// is never recycled for another chunk, even after it restarts (a kernel
// reading through it checks nothing: chunk.Store.OpenShared).
func (c *Client) OpenChunkData(chain uint32, ino uint64, slot uint32) (*os.File, int64, error) {
	if !c.opts.DirectRead {
		return nil, 0, errs.New(errs.NotSupported, "client: passthrough needs direct reads")
	}
	if placement.ChainID(chain) >= placement.FirstReplicatedChain {
		return nil, 0, errs.New(errs.NotSupported, "client: chain %d is replicated: no passthrough", chain)
	}
	t := placement.TargetID(chain)
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RetryTimeout)
	defer cancel()
	p := c.directPeerFor(ctx, t)
	if p == nil {
		return nil, 0, errs.New(errs.NotSupported, "client: target %d is not readable directly from here", t)
	}
	resp, files, _, err := p.ask(&wire.DirectOpenReq{Target: t, Ino: ino, Slot: slot, Data: true}, func(r *wire.DirectOpenResp, n int) bool {
		switch {
		case r.Code != 0:
			return n == 0
		case r.Data:
			return n == 1
		}
		return n == 2 // an older service: the chunk's two files
	})
	if err != nil {
		return nil, 0, err
	}
	if resp.Code != 0 {
		return nil, 0, errs.New(errs.Code(resp.Code), "%s", resp.Msg)
	}
	if !resp.Data {
		// An older service ignored Data and sent the chunk's two files,
		// unchecked: not for passthrough.
		for _, f := range files {
			f.Close()
		}
		return nil, 0, errs.New(errs.NotSupported, "client: the storage service does not open chunks for passthrough")
	}
	return files[0], int64(resp.Len), nil
}
