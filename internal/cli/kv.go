package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/errs"
)

// KVCreate creates a KV-cache store.
func (e *Env) KVCreate(ctx context.Context, store string, cfg client.KVConfig) error {
	return e.Client.KVCreate(ctx, store, cfg)
}

// KVPut stores the content of local file src ("-": stdin) under key.
func (e *Env) KVPut(ctx context.Context, store, key, src string) error {
	s, err := e.Client.KVOpen(ctx, store)
	if err != nil {
		return err
	}
	var b []byte
	if src == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(src)
	}
	if err != nil {
		return err
	}
	stored, err := s.Put(ctx, []string{key}, [][]byte{b})
	if err != nil {
		return err
	}
	if !stored[0] {
		return errs.New(errs.Exists, "kv put %s %q: the key has a value already (keys are write-once)", store, key)
	}
	return nil
}

// KVGet writes the value of key to local file dst ("-": stdout).
func (e *Env) KVGet(ctx context.Context, store, key, dst string) error {
	s, err := e.Client.KVOpen(ctx, store)
	if err != nil {
		return err
	}
	// A first read of up to 1 MiB, which also says the value's size.
	probe := make([]byte, 1<<20)
	n, total, err := s.GetAt(ctx, key, probe, 0)
	if err != nil {
		return err
	}
	buf := probe[:n]
	if total > int64(n) {
		buf = make([]byte, total)
		got, err := s.Get(ctx, []string{key}, [][]byte{buf})
		if err != nil {
			return err
		}
		if got[0] < 0 {
			return errs.New(errs.NotFound, "kv get %s %q: no value", store, key)
		}
		buf = buf[:got[0]]
	}
	if dst == "-" {
		_, err = e.Stdout.Write(buf)
		return err
	}
	return os.WriteFile(dst, buf, 0o644)
}

// KVLs lists a store's keys with sizes and put times.
func (e *Env) KVLs(ctx context.Context, store string) error {
	s, err := e.Client.KVOpen(ctx, store)
	if err != nil {
		return err
	}
	ents, err := s.List(ctx)
	if err != nil {
		return err
	}
	for _, x := range ents {
		fmt.Fprintf(e.Stdout, "%12d  %s  %s\n", x.Size, x.Created.UTC().Format(time.RFC3339), x.Key)
	}
	return nil
}

// KVRm deletes keys.
func (e *Env) KVRm(ctx context.Context, store string, keys []string) error {
	s, err := e.Client.KVOpen(ctx, store)
	if err != nil {
		return err
	}
	_, err = s.Delete(ctx, keys)
	return err
}

// KVStats prints a store's configuration and counters.
func (e *Env) KVStats(ctx context.Context, store string) error {
	s, err := e.Client.KVOpen(ctx, store)
	if err != nil {
		return err
	}
	st, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "store %s: %d targets, %d replicas, capacity %d bytes, ttl %v\n", store, st.Targets, st.Replicas, st.Capacity, st.TTL)
	fmt.Fprintf(e.Stdout, "keys %d (replicas counted each), used %d bytes (%.1f%%)\n", st.Keys, st.Used, 100*float64(st.Used)/float64(max(st.Capacity, 1)))
	fmt.Fprintf(e.Stdout, "puts %d, gets %d (%d sent unread), hits %d, deletes %d, evictions %d, expired %d, refused for space %d\n",
		st.Puts, st.Gets, st.SentUnread, st.Hits, st.Deletes, st.Evictions, st.Expired, st.RefusedForSpace)
	return nil
}
