// Package pause waits for a while or until a context ends, whichever comes
// first: the wait between retries, polls and paced steps everywhere in
// Sluice.
package pause

import (
	"context"
	"time"
)

// For waits d, or less if ctx ends first; it returns ctx's error then, nil
// after the full wait. A d of zero or less returns at once (nil unless ctx
// has already ended). The timer is stopped on return, so a wait cut short
// leaves nothing behind.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
