package kv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-fs/sluice/internal/errs"
)

// EtcdOptions configures OpenEtcd.
type EtcdOptions struct {
	// Endpoints are the etcd client URLs. Required unless Client is set.
	Endpoints []string

	// Prefix is prepended to every key, so that several file systems (or
	// other users) can share one etcd cluster; "" means "sluice/". Services
	// sharing one file system must use the same Prefix.
	Prefix string

	// DialTimeout bounds connecting to etcd in OpenEtcd; 0 means 5s.
	DialTimeout time.Duration

	// RequestTimeout bounds each request to etcd (one read, one page of a
	// scan, one commit); 0 means 10s.
	RequestTimeout time.Duration

	// MaxTxnOps is the etcd cluster's --max-txn-ops: the most compares,
	// and the most writes, one etcd transaction may carry. 0 means 128,
	// etcd's default. An Update whose commit needs more fails (see
	// OpenEtcd); raise etcd's --max-txn-ops and this field together.
	MaxTxnOps int

	// Logger receives the etcd client's messages (informational ones at
	// debug level); nil means slog.Default().
	Logger *slog.Logger

	// Client, if set, is used instead of dialing Endpoints. Close does not
	// close it.
	Client *clientv3.Client
}

const (
	defaultEtcdPrefix         = "sluice/"
	defaultEtcdDialTimeout    = 5 * time.Second
	defaultEtcdRequestTimeout = 10 * time.Second
	defaultEtcdMaxTxnOps      = 128

	// Scans read etcd in pages: a small first one, as many scans stop
	// after a key or two, then larger ones.
	etcdFirstPage = 64
	etcdPage      = 1024
)

// ErrCommitUnknown is wrapped by the error Update returns when a commit
// request to etcd failed in a way that leaves its outcome unknown: it may
// or may not have been applied, and may still be. Such errors also wrap
// errs.ErrUnavailable, never a context error.
var ErrCommitUnknown = errors.New("kv: etcd commit outcome unknown")

func (o *EtcdOptions) setDefaults() {
	if o.Prefix == "" {
		o.Prefix = defaultEtcdPrefix
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = defaultEtcdDialTimeout
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = defaultEtcdRequestTimeout
	}
	if o.MaxTxnOps == 0 {
		o.MaxTxnOps = defaultEtcdMaxTxnOps
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports whether the options are usable; zero fields take their
// defaults.
func (o EtcdOptions) Validate() error {
	o.setDefaults()
	switch {
	case o.Client == nil && len(o.Endpoints) == 0:
		return fmt.Errorf("kv: etcd options: no Endpoints and no Client: %w", errs.ErrInvalid)
	case o.DialTimeout < 0 || o.RequestTimeout < 0:
		return fmt.Errorf("kv: etcd options: negative timeout: %w", errs.ErrInvalid)
	case o.MaxTxnOps < 0:
		return fmt.Errorf("kv: etcd options: negative MaxTxnOps %d: %w", o.MaxTxnOps, errs.ErrInvalid)
	case strings.Count(o.Prefix, "\xff") == len(o.Prefix):
		return fmt.Errorf("kv: etcd options: Prefix %q has no end (all 0xff): %w", o.Prefix, errs.ErrInvalid)
	}
	return nil
}

// OpenEtcd returns a DB stored in an etcd cluster, under opts.Prefix. It
// dials etcd (unless opts.Client is set) and checks that it answers.
//
// Transactions are optimistic and checked by etcd itself, so several
// processes (several metadata services) may share one cluster and prefix:
// a View reads at one etcd revision; an Update buffers its writes, records
// the mod revision of every key it read and the ranges it scanned, and
// commits in one etcd transaction whose compares fail if any of that
// changed. See the package comment for the mapping, the limits, and what
// happens when a commit's outcome is unknown (ErrCommitUnknown).
func OpenEtcd(ctx context.Context, opts EtcdOptions) (DB, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	d := &etcdDB{
		c:          opts.Client,
		prefix:     opts.Prefix,
		end:        clientv3.GetPrefixRangeEnd(opts.Prefix),
		reqTimeout: opts.RequestTimeout,
		maxOps:     opts.MaxTxnOps,
		log:        opts.Logger,
	}
	if d.c == nil {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   opts.Endpoints,
			DialTimeout: opts.DialTimeout,
			Context:     context.WithoutCancel(ctx),
			Logger:      newZapSlog(opts.Logger.With("component", "etcd-client")),
		})
		if err != nil {
			return nil, fmt.Errorf("kv: connect to etcd %v: %w: %w", opts.Endpoints, errs.ErrUnavailable, err)
		}
		d.c, d.ownClient = c, true
	}
	// One read checks that etcd answers (and that we may read the prefix).
	rctx, cancel := context.WithTimeout(ctx, opts.DialTimeout+opts.RequestTimeout)
	defer cancel()
	if _, err := d.c.Get(rctx, d.prefix, clientv3.WithRange(d.end), clientv3.WithLimit(1), clientv3.WithKeysOnly()); err != nil {
		if d.ownClient {
			d.c.Close()
		}
		return nil, fmt.Errorf("kv: open etcd %v prefix %q: %w", opts.Endpoints, opts.Prefix, d.readErr(ctx, err))
	}
	return d, nil
}

// etcdDB implements DB on etcd. The transaction type (txn) is the one the
// embedded engines use; an etcdReader gives it its snapshot, and records
// the mod revision of every key it returns for the commit's compares.
type etcdDB struct {
	gate
	c          *clientv3.Client
	ownClient  bool
	prefix     string
	end        string // range end of all keys under prefix
	reqTimeout time.Duration
	maxOps     int
	log        *slog.Logger

	closeOnce sync.Once
	closeErr  error
}

func (d *etcdDB) View(ctx context.Context, fn func(tx Txn) error) error {
	if err := d.enter(); err != nil {
		return fmt.Errorf("kv: view: %w", err)
	}
	defer d.exit()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kv: view: %w", err)
	}
	tx := newTxn(&etcdReader{d: d, ctx: ctx}, false, 0, 1)
	if err := run(tx, fn); err != nil {
		return err
	}
	return tx.err
}

// Update runs fn until its commit succeeds, as db.Update does, minus the
// priority queue: that needs a single committer, and etcd's writers are
// many processes. A commit whose outcome is unknown is not retried (see
// ErrCommitUnknown).
func (d *etcdDB) Update(ctx context.Context, fn func(tx Txn) error) error {
	if err := d.enter(); err != nil {
		return fmt.Errorf("kv: update: %w", err)
	}
	defer d.exit()
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kv: update: %w", err)
		}
		r := &etcdReader{d: d, ctx: ctx, revs: make(map[string]int64)}
		tx := newTxn(r, true, 0, attempt)
		err := run(tx, fn)
		switch {
		case tx.err != nil && errors.Is(tx.err, errSnapshotGone):
			// etcd compacted the revision being read: whatever fn made
			// of the failed read, start again on a new revision.
			err = errConflict
		case err != nil:
			return err
		case tx.err != nil:
			return tx.err
		case !tx.hasWrites():
			// Read-only: serializable as of its revision.
			return nil
		default:
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("kv: update: %w", err)
			}
			committing(ctx)
			err = d.commit(ctx, tx, r)
		}
		if again, err := d.retry(err, attempt); !again {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return fmt.Errorf("kv: update: %w", err)
		}
	}
}

// commit sends tx as one etcd transaction: If(its read set is unchanged)
// Then(its writes). It returns nil, errConflict, or another error.
func (d *etcdDB) commit(ctx context.Context, tx *txn, r *etcdReader) error {
	cmps := d.compares(tx, r)
	ops := make([]clientv3.Op, 0, tx.writes.Len())
	tx.writes.Scan(func(w write) bool {
		if w.del {
			ops = append(ops, clientv3.OpDelete(d.prefix+string(w.key)))
		} else {
			ops = append(ops, clientv3.OpPut(d.prefix+string(w.key), string(w.value)))
		}
		return true
	})
	if n := max(len(cmps), len(ops)); n > d.maxOps {
		return fmt.Errorf("transaction needs %d compares and %d writes in one etcd transaction, over the limit of %d: "+
			"raise etcd's --max-txn-ops and EtcdOptions.MaxTxnOps to at least %d: %w",
			len(cmps), len(ops), d.maxOps, n, errs.ErrInvalid)
	}
	// The commit is waited for even if ctx ends (as the embedded engines
	// do), within the request timeout: giving up on it early would only
	// turn a likely success into an unknown outcome.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.reqTimeout)
	defer cancel()
	resp, err := d.c.Txn(cctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return d.commitErr(err)
	}
	if !resp.Succeeded {
		return errConflict
	}
	return nil
}

// compares returns the compares that hold at commit time only if every
// read of tx would return what it returned at its revision:
//
//   - for each key read, its mod revision is the one seen (0: absent);
//   - for each range scanned, no key in it has a mod revision above the
//     snapshot's (no insert or update), and each key seen there still has
//     the mod revision seen (no delete).
func (d *etcdDB) compares(tx *txn, r *etcdReader) []clientv3.Cmp {
	if len(tx.reads) == 0 && len(tx.scans) == 0 {
		return nil // blind writes only
	}
	keys := make(map[string]int64)
	for _, pr := range tx.reads {
		keys[string(pr.key)] = r.revs[string(pr.key)] // 0 when absent
	}
	ranges := make(map[[2]string]bool)
	var cmps []clientv3.Cmp
	for _, sr := range tx.scans {
		start, end := d.prefix+string(sr.start), d.end
		if sr.end != nil {
			end = d.prefix + string(sr.end)
		}
		if !ranges[[2]string{start, end}] {
			ranges[[2]string{start, end}] = true
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(start).WithRange(end), "<", r.rev+1))
		}
		for _, p := range sr.seen {
			keys[string(p.key)] = r.revs[string(p.key)]
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(d.prefix+k), "=", keys[k]))
	}
	return cmps
}

// commitErr classifies a failed commit request. etcd rejects some requests
// before they reach the raft log (too many ops, too large, out of space,
// not permitted): nothing was written and the error says why. Any other
// failure (timeout, lost connection, leader change) may have happened
// before or after etcd applied the transaction: the outcome is unknown.
func (d *etcdDB) commitErr(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps):
		return fmt.Errorf("etcd rejected the commit (raise its --max-txn-ops, and EtcdOptions.MaxTxnOps to match): %w: %w", errs.ErrInvalid, err)
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("etcd rejected the commit (over its --max-request-bytes): %w: %w", errs.ErrInvalid, err)
	case errors.Is(err, rpctypes.ErrNoSpace):
		return fmt.Errorf("etcd rejected the commit: %w: %w", errs.ErrNoSpace, err)
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrUserEmpty),
		errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrAuthOldRevision):
		return fmt.Errorf("etcd rejected the commit: %w: %w", errs.ErrPermission, err)
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.InvalidArgument, codes.ResourceExhausted, codes.FailedPrecondition, codes.OutOfRange:
			// Checked before the request is proposed (or, for
			// ResourceExhausted, before it is sent): nothing written.
			return fmt.Errorf("etcd rejected the commit: %w: %v", errs.ErrInvalid, err)
		}
	}
	d.log.Warn("kv: etcd commit outcome unknown", "err", err)
	// Deliberately not wrapping err: it may be a context error, which
	// callers read as "nothing was written".
	return fmt.Errorf("%w (%v): it may or may not have been applied: %w", ErrCommitUnknown, err, errs.ErrUnavailable)
}

// errSnapshotGone is wrapped by reads at a revision etcd has compacted.
var errSnapshotGone = errors.New("kv: etcd revision compacted during the transaction")

// readErr classifies a failed read. A read has no side effect, so the
// error keeps the caller's context error, if any, in its chain.
func (d *etcdDB) readErr(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%v: %w", err, ctx.Err())
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w: %w: %w", errSnapshotGone, errs.ErrUnavailable, err)
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrUserEmpty),
		errors.Is(err, rpctypes.ErrInvalidAuthToken):
		return fmt.Errorf("etcd: %w: %w", errs.ErrPermission, err)
	}
	return fmt.Errorf("etcd: %w: %w", errs.ErrUnavailable, err)
}

// Sync returns at once: a commit that returned is in the raft log of a
// quorum of etcd members, each synced to disk.
func (d *etcdDB) Sync(context.Context) error {
	if err := d.enter(); err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	d.exit()
	return nil
}

func (d *etcdDB) Close() error {
	d.closeOnce.Do(func() {
		d.shut()
		if d.ownClient {
			if err := d.c.Close(); err != nil && !errors.Is(err, context.Canceled) {
				d.closeErr = fmt.Errorf("kv: close etcd client: %w", err)
			}
		}
	})
	return d.closeErr
}

// etcdReader is a transaction's snapshot: the first read fixes the etcd
// revision, later ones read at it. In an Update it records the mod
// revision of every key it returns.
type etcdReader struct {
	d    *etcdDB
	ctx  context.Context
	rev  int64            // 0 until the first read
	revs map[string]int64 // user key -> mod revision; nil in a View
}

// read gets key (with opts) at the reader's revision. The first read is
// linearizable, so the transaction sees every commit that completed before
// it; it fixes the revision. Later reads at that revision are
// serializable: the member answering need not ask the leader, as the
// revision is immutable. A member that has not applied the revision yet
// refuses (future revision), and the read is repeated linearizably.
func (r *etcdReader) read(key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.d.reqTimeout)
	defer cancel()
	var resp *clientv3.GetResponse
	var err error
	if r.rev == 0 {
		resp, err = r.d.c.Get(ctx, key, opts...)
	} else {
		opts = append(opts, clientv3.WithRev(r.rev))
		resp, err = r.d.c.Get(ctx, key, append(opts, clientv3.WithSerializable())...)
		if errors.Is(err, rpctypes.ErrFutureRev) {
			resp, err = r.d.c.Get(ctx, key, opts...)
		}
	}
	if err != nil {
		return nil, r.d.readErr(r.ctx, err)
	}
	if r.rev == 0 {
		r.rev = resp.Header.Revision
	}
	if r.revs != nil {
		for _, kv := range resp.Kvs {
			r.revs[string(kv.Key[len(r.d.prefix):])] = kv.ModRevision
		}
	}
	return resp, nil
}

func (r *etcdReader) get(key []byte) ([]byte, bool, error) {
	resp, err := r.read(r.d.prefix + string(key))
	if err != nil {
		return nil, false, err
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	return resp.Kvs[0].Value, true, nil
}

func (r *etcdReader) iter(start, end []byte) (iterator, error) {
	it := &etcdIter{r: r, from: r.d.prefix + string(start), end: r.d.end}
	if end != nil {
		it.end = r.d.prefix + string(end)
	}
	return it, nil
}

func (r *etcdReader) release() {}

// etcdIter pages through a range at the reader's revision.
type etcdIter struct {
	r     *etcdReader
	from  string // first key of the next page; "" when there is none
	end   string
	pages int
	page  []*mvccpb.KeyValue
	i     int
	err   error
}

// fetch reads the next page, reporting whether it has a key.
func (it *etcdIter) fetch() bool {
	it.page, it.i = nil, 0
	if it.from == "" || it.err != nil {
		return false
	}
	limit := int64(etcdPage)
	if it.pages == 0 {
		limit = etcdFirstPage
	}
	it.pages++
	resp, err := it.r.read(it.from, clientv3.WithRange(it.end), clientv3.WithLimit(limit))
	if err != nil {
		it.err = err
		return false
	}
	it.page, it.from = resp.Kvs, ""
	if resp.More && len(resp.Kvs) > 0 {
		it.from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return len(it.page) > 0
}

func (it *etcdIter) first() bool { return it.fetch() }

func (it *etcdIter) next() bool {
	it.i++
	if it.i < len(it.page) {
		return true
	}
	return it.fetch()
}

func (it *etcdIter) key() []byte { return it.page[it.i].Key[len(it.r.d.prefix):] }

func (it *etcdIter) value() ([]byte, error) { return it.page[it.i].Value, nil }

func (it *etcdIter) close() error { return it.err }
