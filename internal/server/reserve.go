package server

import (
	"runtime"

	"github.com/sluice-fs/sluice/internal/qos"
	"github.com/sluice-fs/sluice/internal/wire"
)

// cpuReserve makes srv keep reserve of the process's Ps free of
// checkpoint and background requests while interactive ones come
// (qos.Reserve, docs/qos.md). It does nothing when reserve is 0 or QoS
// is off.
func cpuReserve(srv *wire.Server, reserve int, off bool) *qos.Reserve {
	if off || reserve <= 0 {
		return nil
	}
	r := qos.NewReserve(qos.ReserveSlots(runtime.GOMAXPROCS(0), reserve), 0)
	srv.Admit = func(tag wire.QosTag, done <-chan struct{}) (func(), bool) {
		return r.Admit(qos.FromWire(tag.Class), done)
	}
	return r
}
