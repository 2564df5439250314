package client

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-fs/sluice/internal/wire"
)

// Change is one entry of the namespace change feed: the name Name in the
// directory Ino (Entry), or the attributes of the inode Ino.
type Change struct {
	Entry bool
	Ino   uint64
	Name  string
}

// Changes is one answer of the change feed (Client.Watch).
type Changes struct {
	// Epoch and Cursor are where to ask from next.
	Epoch, Cursor uint64
	// Reset says changes were missed since the cursor asked from (the
	// metadata service restarted, or the caller fell too far behind).
	Reset bool
	// Complete says the service sees every change of the namespace;
	// false when other metadata services share its engine (etcd).
	Complete bool
	Changes  []Change
}

// Watch asks the metadata service for the names and inodes that other
// clients changed after cursor of the feed epoch, waiting up to wait for
// the first (docs/adr/0022-namespace-feed.md). Epoch 0 starts a watch: the
// answer has the epoch and cursor to ask from and no changes. A service
// that has no feed answers with an error (errs.NotSupported).
//
// The changes this client made itself are left out, as long as they and
// the watch travel on the same connection; after a reconnection some may
// be reported too.
func (c *Client) Watch(ctx context.Context, epoch, cursor uint64, wait time.Duration) (Changes, error) {
	req := &wire.WatchReq{Epoch: epoch, Cursor: cursor, WaitMs: uint32(max(wait, 0) / time.Millisecond)}
	var resp wire.WatchResp
	if err := c.metaCall1(ctx, wire.OpWatch, req, &resp); err != nil {
		return Changes{}, fmt.Errorf("watch the namespace: %w", err)
	}
	out := Changes{Epoch: resp.Epoch, Cursor: resp.Cursor, Reset: resp.Reset, Complete: resp.Complete}
	if len(resp.Changes) > 0 {
		out.Changes = make([]Change, len(resp.Changes))
		for i, ch := range resp.Changes {
			out.Changes[i] = Change{Entry: ch.Kind == wire.ChangeEntry, Ino: ch.Ino, Name: ch.Name}
		}
	}
	return out, nil
}
