// Package kvcache is the server side of Sluice's KV-cache store for LLM
// inference (docs/kvcache.md): named stores of write-once values (64 KiB
// to tens of MiB, keyed by strings such as a token-prefix hash), each with
// a share on every storage target of the store. Values are files in the
// target's kvcache directory, indexed in memory; keys are not files of the
// namespace and cost no metadata transaction. A share has a capacity with
// watermark eviction (least recently used first; a value being read holds
// a read lease and stays), an optional TTL, and survives a restart of the
// process (the index is rebuilt from the files).
//
// The client (client/kvcache.go) places each key on Replicas targets of
// the store by rendezvous hashing and talks to them directly.
package kvcache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-fs/sluice/internal/checksum"
	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/placement"
	"github.com/sluice-fs/sluice/internal/wire"
)

// Service serves the KV-cache ops of the targets a process hosts. Safe for
// concurrent use.
type Service struct {
	dir string // <data dir>/kvcache
	ids map[placement.TargetID]bool
	now func() time.Time

	mu     sync.Mutex
	shares map[shareKey]*share
}

type shareKey struct {
	t     placement.TargetID
	store string
}

// Open opens the KV-cache shares of targets ids under dataDir/kvcache/.
func Open(dataDir string, ids []placement.TargetID) (*Service, error) {
	s := &Service{dir: filepath.Join(dataDir, "kvcache"), ids: make(map[placement.TargetID]bool), now: time.Now, shares: make(map[shareKey]*share)}
	for _, id := range ids {
		s.ids[id] = true
		tdir := filepath.Join(s.dir, strconv.FormatUint(uint64(id), 10))
		ents, err := os.ReadDir(tdir)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kvcache: %w", err)
		}
		for _, e := range ents {
			if !e.IsDir() || validStore(e.Name()) != nil {
				continue
			}
			sh, err := openShare(filepath.Join(tdir, e.Name()), nil, s.now)
			if err != nil {
				return nil, fmt.Errorf("kvcache: open store %s on target %d: %w", e.Name(), id, err)
			}
			s.shares[shareKey{id, e.Name()}] = sh
		}
	}
	return s, nil
}

// Close ends the uploads in progress.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sh := range s.shares {
		sh.close()
	}
	return nil
}

func (s *Service) share(r *wire.KVReq) (*share, error) {
	if !s.ids[r.Target] {
		return nil, errs.New(errs.NotFound, "kvcache: target %d is not hosted here", r.Target)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shares[shareKey{r.Target, r.Store}]
	if sh == nil {
		return nil, errs.New(errs.NotFound, "kvcache: no store %q on target %d", r.Store, r.Target)
	}
	return sh, nil
}

func (s *Service) create(m *wire.KVCreateReq) error {
	if err := validStore(m.Store); err != nil {
		return err
	}
	if !s.ids[m.Target] {
		return errs.New(errs.NotFound, "kvcache: target %d is not hosted here", m.Target)
	}
	if m.Config.Replicas < 1 || m.Config.Replicas > 3 || int(m.Config.Replicas) > len(m.Config.Targets) || m.Config.Capacity == 0 || m.Config.TTL < 0 {
		return errs.New(errs.Invalid, "kvcache: store %q: replicas %d over %d targets, capacity %d, ttl %d", m.Store, m.Config.Replicas, len(m.Config.Targets), m.Config.Capacity, m.Config.TTL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := shareKey{m.Target, m.Store}
	if sh := s.shares[k]; sh != nil {
		if sameConfig(&sh.cfg, &m.Config) {
			return nil
		}
		return errs.New(errs.Exists, "kvcache: store %q exists on target %d with another configuration", m.Store, m.Target)
	}
	sh, err := openShare(filepath.Join(s.dir, strconv.FormatUint(uint64(m.Target), 10), m.Store), &m.Config, s.now)
	if err != nil {
		return err
	}
	s.shares[k] = sh
	return nil
}

// Register installs the KV-cache handlers (wire ops 81-87) on srv.
func (s *Service) Register(srv *wire.Server) {
	handle(srv, wire.OpKVCreate, func(_ context.Context, m *wire.KVCreateReq, _ []byte) (wire.Message, []byte, error) {
		return &wire.Empty{}, nil, s.create(m)
	})
	handle(srv, wire.OpKVStat, func(_ context.Context, m *wire.KVReq, _ []byte) (wire.Message, []byte, error) {
		sh, err := s.share(m)
		if err != nil {
			return nil, nil, err
		}
		r := sh.stat()
		return &r, nil, nil
	})
	handle(srv, wire.OpKVPut, func(_ context.Context, m *wire.KVPutReq, data []byte) (wire.Message, []byte, error) {
		sh, err := s.share(&m.KVReq)
		if err != nil {
			return nil, nil, err
		}
		st, err := sh.put(m, data)
		return &wire.KVPutResp{Status: st}, nil, err
	})
	srv.Handle(wire.OpKVGet, s.handleGet)
	handle(srv, wire.OpKVExists, func(_ context.Context, m *wire.KVKeysReq, _ []byte) (wire.Message, []byte, error) {
		sh, err := s.share(&m.KVReq)
		if err != nil {
			return nil, nil, err
		}
		return &wire.KVExistsResp{Present: sh.exists(m.Keys)}, nil, nil
	})
	handle(srv, wire.OpKVDelete, func(_ context.Context, m *wire.KVKeysReq, _ []byte) (wire.Message, []byte, error) {
		sh, err := s.share(&m.KVReq)
		if err != nil {
			return nil, nil, err
		}
		return &wire.KVDeleteResp{Deleted: sh.del(m.Keys)}, nil, nil
	})
	handle(srv, wire.OpKVList, func(_ context.Context, m *wire.KVListReq, _ []byte) (wire.Message, []byte, error) {
		sh, err := s.share(&m.KVReq)
		if err != nil {
			return nil, nil, err
		}
		r := sh.list(m.After, int(m.Limit))
		return &r, nil, nil
	})
}

// handleGet serves OpKVGet. The bytes go back with their CRC32C (ADR
// 0029; none in process), or, to a client that checks every block
// (ReadFlagUnverified) on a connection that can send a file's pages
// (Request.SendFile), cached whole blocks go unread with the CRC32C they
// were stored with (ADR 0030).
func (s *Service) handleGet(_ context.Context, r *wire.Request) (wire.Response, error) {
	var m wire.KVGetReq
	if err := wire.Unmarshal(r.Body, &m); err != nil {
		return wire.Response{}, fmt.Errorf("kvcache: op %d: %w", wire.OpKVGet, errs.New(errs.Protocol, "malformed request body: %v", err))
	}
	sh, err := s.share(&m.KVReq)
	if err != nil {
		return wire.Response{}, err
	}
	if m.Len > wire.MaxData {
		return wire.Response{}, errs.New(errs.Invalid, "kvcache: read of %d bytes is over the limit of %d", m.Len, wire.MaxData)
	}
	g, err := sh.get(m.Key, m.Off, m.Len, r.SendFile && m.Flags&wire.ReadFlagUnverified != 0)
	if err != nil {
		return wire.Response{}, err
	}
	resp := &wire.KVGetResp{Total: g.total}
	switch {
	case g.file != nil:
		resp.BlockSums, resp.HasBlockSums = g.sums, true
		return wire.Response{Msg: resp, DataFile: g.file, Release: g.release}, nil
	case !r.Local:
		resp.DataCRC, resp.HasDataCRC = checksum.DataCRC(g.data), true
	}
	return wire.Response{Msg: resp, Data: g.data, Release: g.release}, nil
}

func handle[Req any, P interface {
	*Req
	wire.Message
}](srv *wire.Server, op wire.Op, fn func(context.Context, P, []byte) (wire.Message, []byte, error)) {
	srv.Handle(op, func(ctx context.Context, r *wire.Request) (wire.Response, error) {
		m := P(new(Req))
		if err := wire.Unmarshal(r.Body, m); err != nil {
			return wire.Response{}, fmt.Errorf("kvcache: op %d: %w", op, errs.New(errs.Protocol, "malformed request body: %v", err))
		}
		// Values are checked in transit (ADR 0029): a part against the
		// client's CRC32C before it is stored (a read's bytes: handleGet).
		if p, ok := any(m).(*wire.KVPutReq); ok && p.HasDataCRC {
			if got := checksum.DataCRC(r.Data); got != p.DataCRC {
				return wire.Response{}, errs.New(errs.Garbled, "kvcache: put of %d bytes at %d of %q: the data's CRC32C is %08x, the request says %08x (garbled in transit)", len(r.Data), p.Off, p.Key, got, p.DataCRC)
			}
		}
		resp, data, err := fn(ctx, m, r.Data)
		if err != nil {
			return wire.Response{}, err
		}
		return wire.Response{Msg: resp, Data: data}, nil
	})
}
