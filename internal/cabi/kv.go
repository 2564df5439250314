package cabi

import (
	"context"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// kvStore is an open KV-cache store (docs/kvcache.md) and the connection
// it was opened on.
type kvStore struct {
	s    *client.KVStore
	conn *conn
	name string
}

// KVCreate creates the KV-cache store name over every target: capacity
// bytes in all, values expiring after ttl (0: never), replicas copies of
// each. Creating it again with the same configuration is no error.
func (l *Lib) KVCreate(h int64, name string, capacity int64, ttl time.Duration, replicas int) error {
	cn, err := l.conn(h)
	if err != nil {
		return err
	}
	return cn.do("kv create", name, 0, func(ctx context.Context) error {
		return cn.c.KVCreate(ctx, name, client.KVConfig{Capacity: capacity, TTL: ttl, Replicas: replicas})
	})
}

// KVOpen opens the KV-cache store name and returns its handle (freed by
// Free).
func (l *Lib) KVOpen(h int64, name string) (int64, error) {
	cn, err := l.conn(h)
	if err != nil {
		return 0, err
	}
	var s *client.KVStore
	err = cn.do("kv open", name, 0, func(ctx context.Context) (err error) {
		s, err = cn.c.KVOpen(ctx, name)
		return err
	})
	if err != nil {
		return 0, err
	}
	return l.t.Add(KindKV, &kvStore{s: s, conn: cn, name: name}), nil
}

func (l *Lib) kv(h int64) (*kvStore, error) {
	v, err := l.t.Get(h, KindKV)
	if err != nil {
		return nil, err
	}
	return v.(*kvStore), nil
}

func total(bs [][]byte) (n int64) {
	for _, b := range bs {
		n += int64(len(b))
	}
	return n
}

// KVPut stores values[i] under keys[i], all in parallel (client.KVStore.Put):
// stored[i] is false where the key already had a value (keys are
// write-once).
func (l *Lib) KVPut(h int64, keys []string, values [][]byte) (stored []bool, err error) {
	kv, err := l.kv(h)
	if err != nil {
		return nil, err
	}
	err = kv.conn.do("kv put", kv.name, total(values), func(ctx context.Context) (err error) {
		stored, err = kv.s.Put(ctx, keys, values)
		return err
	})
	return stored, err
}

// KVGet reads the values of keys into bufs[i], the caller's memory, all
// in parallel, and returns each one's length, -1 for a key without a
// value. A buffer shorter than its value fails the call (errs.Range).
func (l *Lib) KVGet(h int64, keys []string, bufs [][]byte) (n []int, err error) {
	kv, err := l.kv(h)
	if err != nil {
		return nil, err
	}
	err = kv.conn.do("kv get", kv.name, total(bufs), func(ctx context.Context) (err error) {
		n, err = kv.s.Get(ctx, keys, bufs)
		return err
	})
	return n, err
}

// KVExists returns how many of keys, from the first, have a value.
func (l *Lib) KVExists(h int64, keys []string) (n int, err error) {
	kv, err := l.kv(h)
	if err != nil {
		return 0, err
	}
	err = kv.conn.do("kv exists", kv.name, 0, func(ctx context.Context) (err error) {
		n, err = kv.s.Exists(ctx, keys)
		return err
	})
	return n, err
}

// KVDelete removes keys and returns how many had a value.
func (l *Lib) KVDelete(h int64, keys []string) (n int, err error) {
	kv, err := l.kv(h)
	if err != nil {
		return 0, err
	}
	err = kv.conn.do("kv delete", kv.name, 0, func(ctx context.Context) (err error) {
		n, err = kv.s.Delete(ctx, keys)
		return err
	})
	return n, err
}
