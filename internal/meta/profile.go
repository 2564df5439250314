package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/profile"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Recordings of the I/O profiler (docs/profile.md): "ps" + name -> the
// session (wire.ProfileSession), "pj" + job -> the name of the job's
// running recording, "pb" + name + 0 + u64 batch number (big-endian) ->
// one batch of access records as a client shipped it (profile.Batch).

const (
	// DefaultProfileRecords bounds a recording's records when its start
	// gives no bound (about 25 bytes each in the KV).
	DefaultProfileRecords = 5_000_000
	// profileGrace is how long after its end a recording still takes
	// batches: clients ship what they recorded before the end.
	profileGrace = 10 * time.Second
	// maxProfileRead bounds the bytes of one OpProfileRead reply.
	maxProfileRead = 2 << 20
	maxProfileName = 64
)

var (
	profSessionPrefix = []byte("ps")
	profJobPrefix     = []byte("pj")
	profBatchPrefix   = []byte("pb")
)

func profSessionKey(name string) []byte {
	return append(append([]byte(nil), profSessionPrefix...), name...)
}
func profJobKey(job string) []byte { return append(append([]byte(nil), profJobPrefix...), job...) }
func profBatchesPrefix(name string) []byte {
	return append(append(append([]byte(nil), profBatchPrefix...), name...), 0)
}
func profBatchKey(name string, n uint64) []byte {
	return binary.BigEndian.AppendUint64(profBatchesPrefix(name), n)
}

// checkProfileName allows 1-64 bytes of letters, digits, '.', '_' and '-'.
func checkProfileName(name string) error {
	if name == "" || len(name) > maxProfileName {
		return errs.New(errs.Invalid, "profile name %q: want 1-%d bytes", name, maxProfileName)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return errs.New(errs.Invalid, "profile name %q: only letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

func getProfile(tx kv.Txn, name string) (wire.ProfileSession, error) {
	var s wire.ProfileSession
	v, err := tx.Get(profSessionKey(name))
	if errors.Is(err, kv.ErrNotFound) {
		return s, errs.New(errs.NotFound, "no recording named %q", name)
	}
	if err != nil {
		return s, err
	}
	if err := wire.Unmarshal(v, &s); err != nil {
		return s, errs.New(errs.Corruption, "meta: recording %q: %v", name, err)
	}
	return s, nil
}

func putProfile(tx kv.Txn, s *wire.ProfileSession) { tx.Set(profSessionKey(s.Name), wire.Marshal(s)) }

// ProfileSet starts, stops or removes a recording.
func (s *Service) ProfileSet(ctx context.Context, req *wire.ProfileSetReq) error {
	in := req.Session
	if err := checkProfileName(in.Name); err != nil {
		return fmt.Errorf("meta: profile: %w", err)
	}
	now := time.Now().UnixNano()
	err := s.update(ctx, func(tx kv.Txn) error {
		switch req.Kind {
		case wire.ProfileStart:
			if in.Job == "" || len(in.Job) > 255 {
				return errs.New(errs.Invalid, "job name %q: want 1-255 bytes", in.Job)
			}
			if in.Until <= now {
				return errs.New(errs.Invalid, "recording %q would end before it starts", in.Name)
			}
			if _, err := getProfile(tx, in.Name); err == nil {
				return errs.New(errs.Exists, "a recording named %q exists (remove it first)", in.Name)
			} else if errs.CodeOf(err) != errs.NotFound {
				return err
			}
			if v, err := tx.Get(profJobKey(in.Job)); err == nil {
				if cur, err := getProfile(tx, string(v)); err == nil && cur.Until > now {
					return errs.New(errs.Exists, "job %q is being recorded already (%q)", in.Job, cur.Name)
				}
			} else if !errors.Is(err, kv.ErrNotFound) {
				return err
			}
			sess := wire.ProfileSession{Name: in.Name, Job: in.Job, Dir: in.Dir, Start: now, Until: in.Until, MaxRecords: in.MaxRecords}
			if sess.MaxRecords == 0 {
				sess.MaxRecords = DefaultProfileRecords
			}
			putProfile(tx, &sess)
			tx.Set(profJobKey(in.Job), []byte(in.Name))
		case wire.ProfileStop:
			cur, err := getProfile(tx, in.Name)
			if err != nil {
				return err
			}
			if cur.Until > now {
				cur.Until = now
				putProfile(tx, &cur)
			}
			s.dropProfileJob(tx, &cur)
		case wire.ProfileRemove:
			cur, err := getProfile(tx, in.Name)
			if err != nil {
				return err
			}
			s.dropProfileJob(tx, &cur)
			tx.Delete(profSessionKey(in.Name))
			p := profBatchesPrefix(in.Name)
			var keys [][]byte
			if err := tx.Scan(p, kv.PrefixEnd(p), 0, func(k, _ []byte) bool {
				keys = append(keys, append([]byte(nil), k...))
				return true
			}); err != nil {
				return err
			}
			for _, k := range keys {
				tx.Delete(k)
			}
		default:
			return errs.New(errs.Invalid, "unknown change kind %d", req.Kind)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("meta: profile: %w", err)
	}
	return nil
}

// dropProfileJob removes the job's index entry if it names sess.
func (s *Service) dropProfileJob(tx kv.Txn, sess *wire.ProfileSession) {
	if v, err := tx.Get(profJobKey(sess.Job)); err == nil && string(v) == sess.Name {
		tx.Delete(profJobKey(sess.Job))
	}
}

// ProfileList returns every recording, by name.
func (s *Service) ProfileList(ctx context.Context) ([]wire.ProfileSession, error) {
	var out []wire.ProfileSession
	err := s.db.View(ctx, func(tx kv.Txn) error {
		out = out[:0]
		var derr error
		err := tx.Scan(profSessionPrefix, kv.PrefixEnd(profSessionPrefix), 0, func(k, v []byte) bool {
			var sess wire.ProfileSession
			if err := wire.Unmarshal(v, &sess); err != nil {
				derr = errs.New(errs.Corruption, "meta: recording %q: %v", k[2:], err)
				return false
			}
			out = append(out, sess)
			return true
		})
		if err != nil {
			return err
		}
		return derr
	})
	if err != nil {
		return nil, fmt.Errorf("meta: profile list: %w", err)
	}
	return out, nil
}

// ProfileCheck returns job's running recording (Name "" if none). A
// client's first check of a recording counts it as one of its clients.
func (s *Service) ProfileCheck(ctx context.Context, req *wire.ProfileCheckReq) (wire.ProfileSession, error) {
	now := time.Now().UnixNano()
	var out wire.ProfileSession
	find := func(tx kv.Txn) (wire.ProfileSession, error) {
		v, err := tx.Get(profJobKey(req.Job))
		if errors.Is(err, kv.ErrNotFound) {
			return wire.ProfileSession{}, nil
		}
		if err != nil {
			return wire.ProfileSession{}, err
		}
		sess, err := getProfile(tx, string(v))
		if errs.CodeOf(err) == errs.NotFound || err == nil && sess.Until <= now {
			return wire.ProfileSession{}, nil
		}
		return sess, err
	}
	var err error
	if req.First && req.Name != "" {
		err = s.update(ctx, func(tx kv.Txn) error {
			sess, err := find(tx)
			if err == nil && sess.Name == req.Name {
				sess.Clients++
				putProfile(tx, &sess)
			}
			out = sess
			return err
		})
	} else {
		err = s.db.View(ctx, func(tx kv.Txn) error {
			var err error
			out, err = find(tx)
			return err
		})
	}
	if err != nil {
		return wire.ProfileSession{}, fmt.Errorf("meta: profile check: %w", err)
	}
	return out, nil
}

// ProfileAppend adds a batch of records to a recording: refused with
// errs.NotFound once the recording is over (its end and a grace period
// past it) or removed, and with errs.NoSpace when it would hold more
// records than its bound (the records then count as dropped).
func (s *Service) ProfileAppend(ctx context.Context, req *wire.ProfileAppendReq) error {
	if _, err := profile.Decode(req.Batch); err != nil {
		return fmt.Errorf("meta: profile append: %w", errs.New(errs.Invalid, "%v", err))
	}
	now := time.Now().UnixNano()
	full := false
	err := s.update(ctx, func(tx kv.Txn) error {
		full = false
		sess, err := getProfile(tx, req.Name)
		if err != nil {
			return err
		}
		if now > sess.Until+int64(profileGrace) {
			return errs.New(errs.NotFound, "recording %q is over", req.Name)
		}
		sess.Dropped += req.Dropped
		if sess.Records+uint64(req.Records) > sess.MaxRecords {
			sess.Dropped += uint64(req.Records)
			full = true
		} else {
			sess.Batches++
			sess.Records += uint64(req.Records)
			tx.Set(profBatchKey(req.Name, sess.Batches), req.Batch)
		}
		putProfile(tx, &sess)
		return nil
	})
	if err == nil && full {
		err = errs.New(errs.NoSpace, "recording %q is full", req.Name)
	}
	if err != nil {
		return fmt.Errorf("meta: profile append: %w", err)
	}
	return nil
}

// ProfileRead returns a recording's batches after batch number after.
func (s *Service) ProfileRead(ctx context.Context, req *wire.ProfileReadReq) (wire.ProfileReadResp, error) {
	limit := int(req.MaxBytes)
	if limit <= 0 || limit > maxProfileRead {
		limit = maxProfileRead
	}
	var out wire.ProfileReadResp
	err := s.db.View(ctx, func(tx kv.Txn) error {
		out = wire.ProfileReadResp{Next: req.After}
		if _, err := getProfile(tx, req.Name); err != nil {
			return err
		}
		p := profBatchesPrefix(req.Name)
		size := 0
		var derr error
		err := tx.Scan(profBatchKey(req.Name, req.After+1), kv.PrefixEnd(p), 0, func(k, v []byte) bool {
			if len(k) != len(p)+8 {
				derr = errs.New(errs.Corruption, "meta: recording %q: batch key %q", req.Name, k)
				return false
			}
			if len(out.Batches) > 0 && size+len(v) > limit {
				out.More = true
				return false
			}
			size += len(v)
			out.Batches = append(out.Batches, append([]byte(nil), v...))
			out.Next = binary.BigEndian.Uint64(k[len(p):])
			return true
		})
		if err != nil {
			return err
		}
		return derr
	})
	if err != nil {
		return wire.ProfileReadResp{}, fmt.Errorf("meta: profile read: %w", err)
	}
	return out, nil
}

func (s *Service) registerProfile(srv *wire.Server) {
	handle(srv, wire.OpProfileSet, func(ctx context.Context, m *wire.ProfileSetReq) (wire.Message, error) {
		return &wire.Empty{}, s.ProfileSet(ctx, m)
	})
	handle(srv, wire.OpProfileList, func(ctx context.Context, _ *wire.Empty) (wire.Message, error) {
		l, err := s.ProfileList(ctx)
		return &wire.ProfileListResp{Sessions: l}, err
	})
	handle(srv, wire.OpProfileCheck, func(ctx context.Context, m *wire.ProfileCheckReq) (wire.Message, error) {
		r, err := s.ProfileCheck(ctx, m)
		return &r, err
	})
	handle(srv, wire.OpProfileAppend, func(ctx context.Context, m *wire.ProfileAppendReq) (wire.Message, error) {
		return &wire.Empty{}, s.ProfileAppend(ctx, m)
	})
	handle(srv, wire.OpProfileRead, func(ctx context.Context, m *wire.ProfileReadReq) (wire.Message, error) {
		r, err := s.ProfileRead(ctx, m)
		return &r, err
	})
}
