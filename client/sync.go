package client

import (
	"context"
	"fmt"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// SyncMeta returns once every metadata change acknowledged before the call
// (this client's and any other's) is durable against a crash of the
// metadata service's machine. A metadata service under the default
// durability policy acknowledges a change once it survives a crash of the
// service's process and makes it durable within a few milliseconds (ADR
// 0006); SyncMeta is what fsync(2) is to a local file system's metadata.
// File.Sync and File.Close call it after syncing the data. It costs one
// round trip, and the service syncs only if something is not yet synced.
func (c *Client) SyncMeta(ctx context.Context) error {
	err := c.metaCall(ctx, wire.OpMetaSync, nil, nil)
	if errs.CodeOf(err) == errs.NotSupported {
		// A metadata service from before OpMetaSync synced every change
		// before acknowledging it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync metadata: %w", err)
	}
	return nil
}
