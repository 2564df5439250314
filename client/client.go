// Package client is the Go library for Sluice: it talks to the metadata
// service for the namespace and straight to the storage targets for data.
//
// A Client is safe for concurrent use. Path operations resolve the parent
// directory on the metadata service and then act on it; file data is split
// by the file's layout and sent to all of the file's targets in parallel,
// without asking the metadata service on the data path.
//
// Consistency: metadata operations are atomic and durable when they return.
// File data written through a File is buffered in the client (write-back)
// and sent to the targets when the buffer fills, on Sync and on Close; the
// file's size in the metadata is updated as data is flushed. Sync and Close
// return only when the data is durable on the targets. Another client sees
// data once it has been flushed.
package client

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Options configure a Client. Zero values take the defaults.
type Options struct {
	// Server is the metadata service's address, host:port, or several
	// metadata services' addresses separated by commas: the client uses
	// the first that answers and moves on to the next when it fails.
	Server string
	// Uid and Gid own the files this client creates (default: the process's).
	Uid, Gid *uint32
	// WriteBuffer is the size of each file's write-back buffer (default 8 MiB).
	WriteBuffer int
	// WritesInFlight bounds the flushes of one file in flight (default 8).
	WritesInFlight int
	// ReadAhead is the sequential read-ahead window of a file (default 16 MiB,
	// in blocks of a quarter of it); negative disables read-ahead. Reads of
	// at least a block, and reads of released files, do not use it.
	ReadAhead int
	// ConnsPerServer is the number of TCP connections to each data server
	// address (default 4): one connection's goroutines bound its throughput.
	ConnsPerServer int
	// DialTimeout bounds connecting to a server (default 5 s).
	DialTimeout time.Duration
	// RetryTimeout bounds how long a chunk request to a replicated chain
	// is retried while the chain changes or its replica cannot be reached
	// (default 60 s): long enough to ride out a node's failure.
	RetryTimeout time.Duration
	// FlushTimeout bounds one background flush of written data (default
	// 60 s): past it the flush fails and the next Write, Sync or Close
	// reports the error, so a vanished server cannot hang a writer.
	FlushTimeout time.Duration
	// InlineMax bounds the bytes of a file kept in the metadata service
	// instead of chunks (inline data, ADR 0009): 0 means the service's
	// limit, a positive value the smaller of the two, negative none.
	InlineMax int
	// StagingDir, when set, is a directory on a local disk where the
	// client stages files written under a directory with the checkpoint
	// absorb policy (ADR 0013, docs/checkpoint.md): their writes, Sync and
	// Close are acknowledged once durable there, and a drainer writes them
	// to the targets in the background. A client starting with the same
	// StagingDir drains what a client that died there left. Without it,
	// the policy is ignored and files are written straight to the targets.
	StagingDir string
	// StagingReserve, with a StagingDir on a memory file system (tmpfs:
	// /dev/shm), is how many bytes of data files the client allocates
	// there in the background at start (fallocate), for its first
	// checkpoint's segments to be written into pages that exist, as later
	// checkpoints' are into drained segments' files (docs/checkpoint.md).
	// Capped with those at 16 GiB and a quarter of the file system; the
	// memory stays taken while the client lives. Ignored on a disk.
	StagingReserve int64
	// StagingMax bounds the bytes a StagingDir holds staged and not yet
	// drained (stagelimit.go, docs/checkpoint.md): a write that would
	// pass it waits until drains make room, so a burst larger than the
	// staging disk runs at the drain's rate instead of failing. 0 means
	// three quarters of the space available there at start (less, on a
	// memory file system, what its pool of drained files may take).
	StagingMax int64
	// TierTimeout bounds each request to an object-tier backend, retries
	// included (default 30 s): a read of a released file whose backend
	// does not answer fails with errs.Unavailable (EIO) past it.
	TierTimeout time.Duration
	// TierReadAhead is how many blocks (tier.BlockSize) of a released
	// file a sequential reader keeps in flight (default 64).
	TierReadAhead int
	// Job names the job (or tenant) this client's chunk reads and writes
	// are scheduled as on the targets (docs/qos.md): a job limit set with
	// `sluice qos set --job` applies to every client naming it. Empty means
	// the environment variable SLUICE_QOS_JOB, and with that unset no job.
	Job string
	// Class is the priority class of this client's chunk reads and writes:
	// interactive, training, checkpoint or background. Empty means the
	// environment variable SLUICE_QOS_CLASS, and with that unset training.
	Class string
	// TierNoRestoreOnRead keeps released files released when they are
	// read: every read goes to the bucket (ADR 0016). By default the
	// first read of a released file starts its restore in the background.
	TierNoRestoreOnRead bool
	// NoAtime keeps files' access times as they are when this client
	// opens them for reading. By default a file opened for reading whose
	// access time is more than a day old gets it set to now, in the
	// background (like Linux's relatime; client/atime.go): the tier
	// mover's "least recently used" order depends on it.
	NoAtime bool
	// Via names what this client serves, when it serves programs other
	// than its own caller: profile.ViaMount for a FUSE mount. A recording
	// of the client's job keeps it with the records (the client's ID ends
	// in "/" + Via), so that the advisor knows which caches stood between
	// the programs and Sluice.
	Via string
	// TierReadRestores is how many restores started by reads of released
	// files run at once in this client (default 2; negative: no limit).
	// A read never waits for its file's restore: it reads the bucket, and
	// the restore waits for a free slot (at most MaxQueuedReadRestores
	// of them wait; past that, a read starts none). Restores asked for by
	// a write, a truncate, `sluice hsm restore` or `sluice stage` run at
	// once. So restores on read never take the bandwidth and CPU that
	// the readers need (docs/tier.md).
	TierReadRestores int
	// TierRestoreLease is how long a restore's lease lasts without a
	// renewal (default 15 s; renewed every third of it): when a client
	// dies mid-restore, another takes the restore over after it.
	TierRestoreLease time.Duration
	// LayoutLease is how long a File uses a layout it learnt from the
	// metadata service for chunk I/O before it asks for the layout again
	// (default DefaultLayoutLease). The targets keep the fences of moved
	// chunks for --chunk-fence-grace after removing them (ADR 0023,
	// addendum), which must outlast this lease plus RetryTimeout and
	// FlushTimeout.
	LayoutLease time.Duration
	// DirectRead reads the chunks of unreplicated chains held by a storage
	// service on this machine straight from their files, checking every
	// block's checksum in the client (ADR 0025); other reads, and any
	// block it cannot verify, go through the network. False means the
	// environment variable SLUICE_DIRECT_READ (1: on).
	DirectRead bool
	// DirectReadMaxChunks bounds the chunks whose files the client holds
	// open for direct reads, across all its Files (two descriptors each):
	// past it, the least recently read chunk's files are closed (its File
	// opens them again at its next read). Default: a quarter of the
	// process's descriptor limit, at most 4,096 chunks.
	DirectReadMaxChunks int
	// QosNoPace turns off pacing at the client: by default a client with
	// a job name (Job) reads the QoS settings every QosPacePoll and holds
	// its job's chunk reads and writes until the job's token buckets
	// allow them, instead of queueing them at the targets (docs/qos.md).
	QosNoPace bool
	// ProfilePoll is how often a client with a job name (Job) asks whether
	// its job is being recorded by the I/O profiler (default 1 s; `sluice
	// profile record`, docs/profile.md).
	ProfilePoll time.Duration
}

// The environment variables that give a client its QoS identity when its
// Options do not (a contract: scripts and job launchers set them).
const (
	EnvQosJob   = "SLUICE_QOS_JOB"
	EnvQosClass = "SLUICE_QOS_CLASS"
)

// qosTag is the identity the options (or the environment) give.
func (o *Options) qosTag() (wire.QosTag, error) {
	job, class := o.Job, o.Class
	if job == "" {
		job = os.Getenv(EnvQosJob)
	}
	if class == "" {
		class = os.Getenv(EnvQosClass)
	}
	if len(job) > 255 {
		return wire.QosTag{}, errs.New(errs.Invalid, "client: QoS job name of %d bytes (at most 255)", len(job))
	}
	if class == "" {
		return wire.QosTag{Job: job}, nil
	}
	c, err := qos.ParseClass(class)
	if err != nil {
		return wire.QosTag{}, fmt.Errorf("client: %w", err)
	}
	return wire.QosTag{Job: job, Class: uint8(c) + 1}, nil
}

func (o *Options) setDefaults() error {
	if o.Server == "" {
		return errs.New(errs.Invalid, "client: no server address given")
	}
	if !o.DirectRead && os.Getenv(EnvDirectRead) == "1" {
		o.DirectRead = true
	}
	if o.DirectReadMaxChunks <= 0 {
		o.DirectReadMaxChunks = defaultDirectMaxChunks()
	}
	if o.Uid == nil {
		u := uint32(os.Getuid())
		o.Uid = &u
	}
	if o.Gid == nil {
		g := uint32(os.Getgid())
		o.Gid = &g
	}
	if o.WriteBuffer <= 0 {
		o.WriteBuffer = 8 << 20
	}
	if o.WritesInFlight <= 0 {
		o.WritesInFlight = 8
	}
	if o.ReadAhead == 0 {
		o.ReadAhead = 16 << 20
	}
	if o.ConnsPerServer <= 0 {
		o.ConnsPerServer = 4
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.RetryTimeout <= 0 {
		o.RetryTimeout = 60 * time.Second
	}
	if o.FlushTimeout <= 0 {
		o.FlushTimeout = 60 * time.Second
	}
	if o.TierTimeout <= 0 {
		o.TierTimeout = 30 * time.Second
	}
	if o.TierReadAhead <= 0 {
		o.TierReadAhead = 64
	}
	if o.LayoutLease <= 0 {
		o.LayoutLease = DefaultLayoutLease
	}
	if o.TierRestoreLease <= 0 {
		o.TierRestoreLease = 15 * time.Second
	}
	if o.TierReadRestores == 0 {
		o.TierReadRestores = DefaultTierReadRestores
	}
	if o.ProfilePoll <= 0 {
		o.ProfilePoll = time.Second
	}
	return nil
}

// Client is a connection to one Sluice file system.
type Client struct {
	opts Options

	metaAddrs []string
	metaIdx   atomic.Uint32 // index of the metadata service in use
	metaMu    sync.Mutex
	meta      *pool

	readSeq atomic.Uint32 // spreads reads over a chain's replicas
	qos     wire.QosTag   // sent with every chunk read and write

	mu      sync.Mutex
	info    wire.ClusterInfo
	targets map[placement.TargetID]string // target -> address
	// remoteTargets: some target is reached over the network, not in
	// this process (its reads may come unread: readTargets splits them).
	remoteTargets atomic.Bool
	chains        map[placement.ChainID]placement.Chain
	pools         map[string]*pool // address -> connections
	closed        bool

	dirHook  atomic.Pointer[func(InodeAttr)] // OnDirChange
	stg      *stager                         // the staging area (Options.StagingDir), or nil
	tiers    tierStores                      // the object tier's backends (tier.go)
	restores restorer                        // restores of released files (restore.go)
	share    tierShare                       // ranged GETs of released files, shared by reads and restores (tiershare.go)
	atime    atimer                          // access times of files opened for reading (atime.go)
	prof     *profiler                       // recordings of the client's job (profile.go); nil without a job
	pace     *pacer                          // the job's token buckets at the client (pace.go); nil without a job

	// Direct reads (direct.go), with Options.DirectRead.
	boot        string // this machine's kernel boot ID
	dmu         sync.Mutex
	dpeers      map[string]*directPeer // by storage service address; guarded by dmu
	dlru        directLRU              // the chunks held open for direct reads
	directBytes atomic.Uint64

	// noOpenIno: the metadata service answered OpOpenIno "not supported"
	// (older): OpenAttrIno asks OpGetAttr instead.
	noOpenIno atomic.Bool
	// noWriteInlineAttr: the metadata service answered OpWriteInlineAttr
	// "not supported" (older): FlushAttr sends two requests.
	noWriteInlineAttr atomic.Bool
	// noCommitWriteAttr: the metadata service answered OpCommitWriteAttr
	// "not supported" (older): FlushAttr of a file with chunks sends the
	// size commit and the change apart.
	noCommitWriteAttr atomic.Bool
	// noCutGen: the metadata service knows no cut generations (before
	// 2026-12-05): commits go without the condition, truncates without
	// OpCutBegin (cut.go).
	noCutGen atomic.Bool
	cuts     cutGens // the cut generations learnt (cut.go)
	// noPunch: a target answered OpChunkPunch "not supported" (before
	// 2026-12-05): ZeroRange writes zeros (allocate.go).
	noPunch atomic.Bool
	// noChunkMap: a target answered OpChunkMap "not supported" (before
	// 2026-12-05): SeekData and SeekHole take every file for all data.
	noChunkMap atomic.Bool

	// settleSeq numbers the moments Files stop holding uncommitted data
	// (File.settled, PendingSince).
	settleSeq atomic.Uint64
	// noTierImport: the metadata service answered OpTierImport "not
	// supported" (an older service): imports make files one at a time.
	noTierImport atomic.Bool
	// noTierImportDry: the same, for OpTierImportDry (a dry run then
	// tells files apart by the walk alone).
	noTierImportDry atomic.Bool
}

// New connects to the metadata service at opts.Server and learns the
// cluster's targets.
func New(ctx context.Context, opts Options) (*Client, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	tag, err := opts.qosTag()
	if err != nil {
		return nil, err
	}
	c := &Client{opts: opts, pools: make(map[string]*pool), qos: tag, dpeers: map[string]*directPeer{}}
	c.dlru.max = opts.DirectReadMaxChunks
	if opts.DirectRead {
		c.boot = wire.BootID()
	}
	c.restores.init(c.opts.TierReadRestores)
	for a := range strings.SplitSeq(opts.Server, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.metaAddrs = append(c.metaAddrs, a)
		}
	}
	if len(c.metaAddrs) == 0 {
		return nil, errs.New(errs.Invalid, "client: no server address given")
	}
	c.meta = c.newMetaPool(c.metaAddrs[0])
	if err := c.refreshCluster(ctx); err != nil {
		c.restores.close()
		c.metaPool().close()
		return nil, fmt.Errorf("client: connect to %s: %w", opts.Server, err)
	}
	// The pacer and the profiler are set before anything starts a
	// goroutine: every metadata call reads c.pace (namespace requests are
	// paced too) and c.prof (its recorder). (The profiler was set last, so
	// the pacer's first poll could race with it.)
	if tag.Job != "" {
		c.prof = newProfiler(c, tag.Job, opts.ProfilePoll)
		if !opts.QosNoPace {
			c.pace = newPacer(c, tag.Job)
		}
	}
	if c.pace != nil {
		c.pace.start()
	}
	if c.prof != nil {
		c.prof.start()
	}
	if opts.StagingDir != "" {
		s, err := openStager(c, opts.StagingDir)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.stg = s
	}
	return c, nil
}

// FSID returns the file system's unique ID.
func (c *Client) FSID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info.FSID
}

func (c *Client) refreshCluster(ctx context.Context) error {
	var info wire.ClusterInfo
	if err := c.metaCall(ctx, wire.OpCluster, nil, &info); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.info = info
	c.targets = make(map[placement.TargetID]string, len(info.Targets))
	remote := false
	for _, t := range info.Targets {
		c.targets[t.ID] = t.Addr
		remote = remote || !wire.IsLocal(t.Addr)
	}
	c.remoteTargets.Store(remote)
	c.chains = make(map[placement.ChainID]placement.Chain, len(info.Chains))
	for _, ch := range info.Chains {
		c.chains[ch.ID] = ch
	}
	return nil
}

// Close closes every connection. Files still open must not be used after.
// With a staging area it first waits, up to Options.FlushTimeout, for the
// staged data to drain; what is left drains at the next client's start.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	if c.stg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.FlushTimeout)
		c.stg.close(ctx)
		cancel()
	}
	c.restores.close()
	c.atime.close()
	if c.prof != nil {
		c.prof.close()
	}
	if c.pace != nil {
		c.pace.close()
	}
	c.closeDirectPeers()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	pools := c.pools
	c.mu.Unlock()
	c.metaPool().close()
	for _, p := range pools {
		p.close()
	}
	return nil
}

// metaCall calls the metadata service. When it cannot be reached (or the
// connection breaks), the call goes to the next metadata service, each
// address tried once. A call whose connection broke after it was sent may
// have been carried out: its repeat can then fail (EEXIST for an exclusive
// create, ENOENT for an unlink).
func (c *Client) metaCall(ctx context.Context, op wire.Op, req, resp wire.Message) error {
	if c.pace != nil && wire.MetaScheduled(op) {
		if err := c.pace.waitMeta(ctx, 1); err != nil {
			return err
		}
		defer func() {
			// A listing's entries, a batch import's files.
			if cr, ok := resp.(interface{ QosCost() int }); ok {
				c.pace.chargeMeta(cr.QosCost()-1, time.Now())
			}
		}()
	}
	if r := c.recorder(); r != nil {
		return c.metaRecorded(ctx, r, op, req, resp)
	}
	return c.metaCall1(ctx, op, req, resp)
}

func (c *Client) metaCall1(ctx context.Context, op wire.Op, req, resp wire.Message) error {
	var err error
	for range len(c.metaAddrs) {
		p := c.metaPool()
		var conn *wire.Conn
		if conn, err = p.get(ctx); err == nil {
			if _, err = conn.Call(ctx, op, req, nil, resp, nil); err == nil || conn.Err() == nil {
				return err
			}
		}
		if errs.CodeOf(err) != errs.Unavailable || ctx.Err() != nil || len(c.metaAddrs) == 1 {
			return err
		}
		c.nextMeta(p)
	}
	return err
}

func (c *Client) metaPool() *pool {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	return c.meta
}

// nextMeta moves from the failed pool to the next metadata service.
func (c *Client) nextMeta(failed *pool) {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	if c.meta != failed {
		return // another call moved on already
	}
	i := int(c.metaIdx.Add(1)) % len(c.metaAddrs)
	c.meta = c.newMetaPool(c.metaAddrs[i])
	go failed.close()
}

// targetConn returns a connection to the server holding target t.
// targetAddr is the address of target t as last known ("" if unknown).
func (c *Client) targetAddr(t placement.TargetID) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.targets[t]
}

func (c *Client) targetConn(ctx context.Context, t placement.TargetID) (*wire.Conn, error) {
	c.mu.Lock()
	addr, ok := c.targets[t]
	c.mu.Unlock()
	if !ok {
		if err := c.refreshCluster(ctx); err != nil {
			return nil, err
		}
		c.mu.Lock()
		addr, ok = c.targets[t]
		c.mu.Unlock()
		if !ok {
			return nil, errs.New(errs.Unavailable, "client: target %d is not in the cluster", t)
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errs.New(errs.Unavailable, "client: closed")
	}
	p := c.pools[addr]
	if p == nil {
		p = c.newPool(addr, c.opts.ConnsPerServer)
		c.pools[addr] = p
	}
	c.mu.Unlock()
	return p.get(ctx)
}

// newMetaPool returns the connection to the metadata service at addr.
func (c *Client) newMetaPool(addr string) *pool { return c.newPool(addr, 1) }

// newPool returns a pool of n connections to addr. Each new connection
// declares the client's QoS identity (OpSession), by which the metadata
// service schedules its requests and a server keeps CPUs free for
// interactive ones (docs/qos.md); a client without one declares nothing.
func (c *Client) newPool(addr string, n int) *pool {
	p := &pool{addr: addr, conns: make([]*wire.Conn, n), dialTimeout: c.opts.DialTimeout}
	if c.qos != (wire.QosTag{}) {
		p.session = &wire.SessionReq{Qos: c.qos}
	}
	return p
}

// pool is a small set of connections to one address, used round-robin and
// redialed when broken.
type pool struct {
	addr        string
	dialTimeout time.Duration
	next        atomic.Uint32
	session     *wire.SessionReq // declared on each new connection, if set

	mu    sync.Mutex
	conns []*wire.Conn
}

func (p *pool) get(ctx context.Context) (*wire.Conn, error) {
	i := int(p.next.Add(1)) % len(p.conns)
	p.mu.Lock()
	defer p.mu.Unlock()
	if cn := p.conns[i]; cn != nil && cn.Err() == nil {
		return cn, nil
	}
	if old := p.conns[i]; old != nil {
		old.Close()
		p.conns[i] = nil
	}
	dctx, cancel := context.WithTimeout(ctx, p.dialTimeout)
	defer cancel()
	cn, err := wire.Dial(dctx, p.addr)
	if err != nil {
		return nil, err
	}
	if p.session != nil {
		// A service that predates OpSession does not schedule by it.
		if _, err := cn.Call(dctx, wire.OpSession, p.session, nil, nil, nil); err != nil && errs.CodeOf(err) != errs.NotSupported {
			cn.Close()
			return nil, err
		}
	}
	p.conns[i] = cn
	return cn, nil
}

func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, cn := range p.conns {
		if cn != nil {
			cn.Close()
			p.conns[i] = nil
		}
	}
}

// Options returns the options the client was made with, defaults filled in.
func (c *Client) Options() Options { return c.opts }
