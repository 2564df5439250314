package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/profile"
	"github.com/sluice-fs/sluice/internal/wire"
)

// The I/O profiler (docs/profile.md): a client with a job name asks the
// metadata service every Options.ProfilePoll whether its job is being
// recorded; while it is, the client records what its callers ask of it
// (opens, reads, writes, syncs, closes and namespace operations, with
// offsets, sizes, starts and durations) and ships the records in batches.
// When no recording runs, an operation costs one atomic load.

const (
	// maxProfilePending bounds the records a client holds before shipping:
	// past it, records are counted as dropped.
	maxProfilePending = 1 << 18
	// profileBatch is the most records in one shipped batch.
	profileBatch = 16384
)

// profiler is a client's side of the recordings of its job.
type profiler struct {
	c       *Client
	job     string
	id      string // this client's ID in the records
	poll    time.Duration
	handles atomic.Uint32 // numbers the open Files
	cur     atomic.Pointer[recording]
	kick    chan struct{} // a full buffer asks for a shipment
	stop    chan struct{}
	done    chan struct{}
}

// recording is a running recording this client records for.
type recording struct {
	name    string
	until   int64 // Unix ns
	mu      sync.Mutex
	recs    []profile.Record
	dropped uint64
	full    bool // the recording refused more: stop recording
}

func (r *recording) add(rec profile.Record, kick chan struct{}) {
	r.mu.Lock()
	switch {
	case r.full || len(r.recs) >= maxProfilePending:
		r.dropped++
	default:
		r.recs = append(r.recs, rec)
		if len(r.recs) == profileBatch {
			select {
			case kick <- struct{}{}:
			default:
			}
		}
	}
	r.mu.Unlock()
}

// take removes up to profileBatch records.
func (r *recording) take() ([]profile.Record, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(len(r.recs), profileBatch)
	out := append([]profile.Record(nil), r.recs[:n]...)
	r.recs = append(r.recs[:0], r.recs[n:]...)
	d := r.dropped
	r.dropped = 0
	return out, d
}

func newProfiler(c *Client, job string, poll time.Duration) *profiler {
	host, _ := os.Hostname()
	var rnd [4]byte
	rand.Read(rnd[:])
	id := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(rnd[:]))
	if c.opts.Via != "" {
		id += "/" + strings.ReplaceAll(c.opts.Via, "/", "_")
	}
	if len(id) > profile.MaxClientID {
		id = id[len(id)-profile.MaxClientID:]
	}
	return &profiler{c: c, job: job, id: id, poll: poll, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// start starts checking for recordings (once the Client holds p).
func (p *profiler) start() { go p.run() }

// run checks for recordings and ships records until stop.
func (p *profiler) run() {
	defer close(p.done)
	t := time.NewTicker(p.poll)
	defer t.Stop()
	for {
		p.check()
		select {
		case <-p.stop:
			p.finish()
			return
		case <-t.C:
		case <-p.kick:
			if r := p.cur.Load(); r != nil {
				p.ship(r, false)
			}
			continue
		}
	}
}

func (p *profiler) call(op wire.Op, req, resp wire.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), max(p.poll, 5*time.Second))
	defer cancel()
	return p.c.metaCall(ctx, op, req, resp)
}

// check learns whether a recording runs, starts or stops recording, and
// ships what was recorded.
func (p *profiler) check() {
	r := p.cur.Load()
	if r != nil && time.Now().UnixNano() >= r.until {
		p.finish()
		r = nil
	}
	var s wire.ProfileSession
	req := &wire.ProfileCheckReq{Job: p.job}
	if r != nil {
		req.Name = r.name
	}
	if err := p.call(wire.OpProfileCheck, req, &s); err != nil {
		// The service is away: keep what was recorded, try again later.
		return
	}
	switch {
	case r != nil && s.Name == r.name:
		p.ship(r, false)
	case r != nil:
		p.finish() // stopped, or another recording replaced it
		fallthrough
	case s.Name != "":
		if s.Name == "" {
			return
		}
		nr := &recording{name: s.Name, until: s.Until}
		p.cur.Store(nr)
		// Count this client in the recording.
		p.call(wire.OpProfileCheck, &wire.ProfileCheckReq{Job: p.job, Name: s.Name, First: true}, &s)
	}
}

// finish stops recording and ships what is left.
func (p *profiler) finish() {
	r := p.cur.Swap(nil)
	if r != nil {
		p.ship(r, true)
	}
}

// ship sends r's records in batches (all of them if all).
func (p *profiler) ship(r *recording, all bool) {
	for {
		recs, dropped := r.take()
		if len(recs) == 0 && dropped == 0 {
			return
		}
		b := profile.Batch{Client: p.id, Records: recs}
		err := p.call(wire.OpProfileAppend, &wire.ProfileAppendReq{Name: r.name, Records: uint32(len(recs)), Dropped: dropped, Batch: b.Append(nil)}, nil)
		switch errs.CodeOf(err) {
		case errs.OK:
		case errs.NoSpace, errs.NotFound:
			// Full or over: record no more for it.
			r.mu.Lock()
			r.full, r.recs = true, nil
			r.mu.Unlock()
			p.cur.CompareAndSwap(r, nil)
			return
		default:
			// Keep them for the next try (they count as dropped if the
			// buffer fills meanwhile).
			r.mu.Lock()
			r.recs = append(recs, r.recs...)
			r.dropped += dropped
			r.mu.Unlock()
			return
		}
		if len(recs) < profileBatch && !all {
			return
		}
	}
}

func (p *profiler) close() {
	close(p.stop)
	<-p.done
}

// recorder returns the running recording, or nil.
func (c *Client) recorder() *recording {
	if c.prof == nil {
		return nil
	}
	return c.prof.cur.Load()
}

// record adds one record to r.
func (c *Client) record(r *recording, op profile.Op, start time.Time, rec profile.Record, err error) {
	rec.Op = op
	rec.Start = start.UnixNano()
	rec.Dur = int64(time.Since(start))
	if err != nil {
		rec.Flags |= profile.FlagError
	}
	r.add(rec, c.prof.kick)
}

// quietKey marks a context whose metadata requests are part of an
// operation already recorded (a read's size check): not recorded again.
type quietKey struct{}

func quiet(ctx context.Context) context.Context { return context.WithValue(ctx, quietKey{}, true) }

// profileOps maps the metadata requests recorded to their record's Op
// (0: not recorded).
var profileOps = func() (m [256]profile.Op) {
	for op, p := range map[wire.Op]profile.Op{
		wire.OpResolve: profile.OpLookup, wire.OpResolveRead: profile.OpLookup, wire.OpLookup: profile.OpLookup,
		wire.OpGetAttr: profile.OpStat, wire.OpCreate: profile.OpCreate, wire.OpPutFile: profile.OpCreate,
		wire.OpMkdir: profile.OpMkdir, wire.OpUnlink: profile.OpUnlink, wire.OpRmdir: profile.OpRmdir,
		wire.OpRename: profile.OpRename, wire.OpReadDir: profile.OpReaddir,
	} {
		m[op] = p
	}
	return m
}()

// metaRecorded is metaCall, recording the namespace operations while a
// recording runs.
func (c *Client) metaRecorded(ctx context.Context, r *recording, op wire.Op, req, resp wire.Message) error {
	var pop profile.Op
	if int(op) < len(profileOps) {
		pop = profileOps[op]
	}
	if pop == 0 || ctx.Value(quietKey{}) != nil {
		return c.metaCall1(ctx, op, req, resp)
	}
	start := time.Now()
	err := c.metaCall1(ctx, op, req, resp)
	var rec profile.Record
	switch m := req.(type) {
	case *wire.NameReq:
		rec.Parent = m.Parent
	case *wire.CreateReq:
		rec.Parent = m.Parent
	case *wire.InoReq:
		rec.Ino = m.Ino
	case *wire.ReadDirReq:
		rec.Ino = m.Ino
	case *wire.RenameReq:
		rec.Parent = m.OldParent
	case *wire.PutFileReq:
		rec.Len = int64(len(m.Data))
	}
	if err == nil {
		switch m := resp.(type) {
		case *wire.Attr:
			rec.Ino = m.Ino
		case *wire.EntryResp:
			rec.Ino = m.Ino
		case *wire.ResolveReadResp:
			rec.Ino = m.Attr.Ino
		case *wire.ReadDirResp:
			rec.N = int64(len(m.Entries))
		}
	}
	c.record(r, pop, start, rec, err)
	return err
}

// fileRecorded runs one operation of f, recording it while a recording
// runs: fn gets a context whose metadata requests are not recorded again
// and returns the bytes it moved.
func (f *File) recorded(ctx context.Context, op profile.Op, off int64, n int, fn func(context.Context) (int, error)) (int, error) {
	r := f.c.recorder()
	if r == nil {
		return fn(ctx)
	}
	start := time.Now()
	got, err := fn(quiet(ctx))
	rerr := err
	if errors.Is(err, io.EOF) {
		rerr = nil // the end of the file is not a failure
	}
	f.c.record(r, op, start, profile.Record{Handle: f.handle, Ino: f.ino, Off: off, Len: int64(n), N: int64(got)}, rerr)
	return got, err
}

// recordOpen records f's opening.
func (f *File) recordOpen() {
	if f.c.prof == nil {
		return
	}
	f.handle = f.c.prof.handles.Add(1)
	r := f.c.prof.cur.Load()
	if r == nil {
		return
	}
	rec := profile.Record{Handle: f.handle, Ino: f.ino, Len: f.size}
	if f.writable() {
		rec.Flags = profile.FlagWrite
	}
	f.c.record(r, profile.OpOpen, time.Now(), rec, nil)
}

// ProfileSession is a recording of the I/O profiler (docs/profile.md).
type ProfileSession struct {
	Name       string
	Job        string    // the job whose clients record
	Dir        string    // the report's default directory ("" for all)
	Start      time.Time // when the recording started (the metadata service's clock)
	Until      time.Time // when it ends or ended
	MaxRecords uint64    // the most records it keeps
	Records    uint64    // records kept
	Dropped    uint64    // records clients could not keep (the recording full, a buffer full)
	Clients    uint32    // clients that joined it
}

// Running reports whether the recording has not ended at now.
func (s *ProfileSession) Running(now time.Time) bool { return now.Before(s.Until) }

func sessionFrom(w *wire.ProfileSession) ProfileSession {
	return ProfileSession{
		Name: w.Name, Job: w.Job, Dir: w.Dir, Start: time.Unix(0, w.Start), Until: time.Unix(0, w.Until),
		MaxRecords: w.MaxRecords, Records: w.Records, Dropped: w.Dropped, Clients: w.Clients,
	}
}

// ProfileStart starts recording job's I/O as recording name for d:
// clients naming the job join it within their ProfilePoll. maxRecords 0
// takes the service's default bound.
func (c *Client) ProfileStart(ctx context.Context, name, job, dir string, d time.Duration, maxRecords uint64) error {
	if d <= 0 {
		return errs.New(errs.Invalid, "profile record: duration %v: want more than 0", d)
	}
	s := wire.ProfileSession{Name: name, Job: job, Dir: dir, Until: time.Now().Add(d).UnixNano(), MaxRecords: maxRecords}
	if err := c.metaCall(ctx, wire.OpProfileSet, &wire.ProfileSetReq{Kind: wire.ProfileStart, Session: s}, nil); err != nil {
		return fmt.Errorf("profile record: %w", err)
	}
	return nil
}

// ProfileStop ends recording name now.
func (c *Client) ProfileStop(ctx context.Context, name string) error {
	return c.profileSet(ctx, wire.ProfileStop, name)
}

// ProfileRemove deletes recording name and its records.
func (c *Client) ProfileRemove(ctx context.Context, name string) error {
	return c.profileSet(ctx, wire.ProfileRemove, name)
}

func (c *Client) profileSet(ctx context.Context, kind uint8, name string) error {
	req := &wire.ProfileSetReq{Kind: kind, Session: wire.ProfileSession{Name: name}}
	if err := c.metaCall(ctx, wire.OpProfileSet, req, nil); err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	return nil
}

// Profiles lists the recordings, by name.
func (c *Client) Profiles(ctx context.Context) ([]ProfileSession, error) {
	var r wire.ProfileListResp
	if err := c.metaCall(ctx, wire.OpProfileList, &wire.Empty{}, &r); err != nil {
		return nil, fmt.Errorf("profile ls: %w", err)
	}
	out := make([]ProfileSession, len(r.Sessions))
	for i := range r.Sessions {
		out[i] = sessionFrom(&r.Sessions[i])
	}
	return out, nil
}

// Profile returns recording name.
func (c *Client) Profile(ctx context.Context, name string) (ProfileSession, error) {
	l, err := c.Profiles(ctx)
	if err != nil {
		return ProfileSession{}, err
	}
	for _, s := range l {
		if s.Name == name {
			return s, nil
		}
	}
	return ProfileSession{}, errs.New(errs.NotFound, "profile: no recording named %q", name)
}

// ReadProfile calls fn with each batch of recording name's records, as
// the clients shipped them (encoded; package internal/profile decodes
// them), in the order they arrived.
func (c *Client) ReadProfile(ctx context.Context, name string, fn func(batch []byte) error) error {
	_, err := c.ReadProfileFrom(ctx, name, 0, fn)
	return err
}

// ReadProfileFrom is ReadProfile from the batch after number after (0:
// the first); it returns the number of the last batch read (after, if
// none), from which a later call goes on.
func (c *Client) ReadProfileFrom(ctx context.Context, name string, after uint64, fn func(batch []byte) error) (uint64, error) {
	for {
		var r wire.ProfileReadResp
		if err := c.metaCall(ctx, wire.OpProfileRead, &wire.ProfileReadReq{Name: name, After: after}, &r); err != nil {
			return after, fmt.Errorf("profile %s: %w", name, err)
		}
		for _, b := range r.Batches {
			if err := fn(b); err != nil {
				return after, err
			}
		}
		if len(r.Batches) > 0 {
			after = r.Next
		}
		if !r.More {
			return after, nil
		}
	}
}
