package server

import (
	"context"
	"time"

	"github.com/sluice-fs/sluice/internal/meta"
	"github.com/sluice-fs/sluice/internal/metrics"
	"github.com/sluice-fs/sluice/internal/mover"
)

// moverRecord reads the last tier mover pass over "/" from the metadata
// (mover.StatusXattr), for the metrics and the dashboard: whichever node
// ran it.
func moverRecord(ms *meta.Service) metrics.MoverRecorder {
	return func() (mover.PassRecord, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b, err := ms.GetXattr(ctx, meta.RootIno, mover.StatusXattr)
		if err != nil {
			return mover.PassRecord{}, false
		}
		r, err := mover.ParsePassRecord(b)
		return r, err == nil
	}
}
