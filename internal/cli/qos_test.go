package cli

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
)

// TestQosSetUsage: flag combinations that cannot mean one change are
// refused before anything is sent.
func TestQosSetUsage(t *testing.T) {
	e := &Env{} // no client: a refused combination never reaches it
	for _, o := range []QosSetOptions{
		{Weight: -1},
		{Class: "interactive", Job: "j", Weight: 1},
		{Class: "interactive", Weight: -1},
		{Class: "interactive", Weight: 2 << 20},
		{Class: "interactive", Weight: 3, Rate: "1M"},
		{Job: "j", Weight: -1},
		{Job: "j", Weight: 3, Rate: "1M"},
		{Job: "j", Weight: -1, Rate: "lots"},
		{Job: "j", Weight: -1, Rate: "1M", Burst: "0"},
		{Job: "j", Weight: -1, Rate: "0"},
		{Class: "interactive", Weight: 3, MetaRate: "10"},
		{Job: "j", Weight: -1, MetaBurst: "10"},
		{Job: "j", Weight: -1, Rate: "1M", MetaBurst: "10"},
		{Job: "j", Weight: -1, MetaRate: "0"},
		{Job: "j", Weight: -1, MetaRate: "-5"},
		{Job: "j", Weight: -1, MetaRate: "many"},
		{Job: "j", Weight: -1, MetaRate: "10", MetaBurst: "0"},
		{Job: "j", Weight: -1, MetaRate: "10", Rate: "lots"},
	} {
		if err := e.QosSet(context.Background(), o); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%+v: %v, want invalid", o, err)
		}
	}
	if err := e.QosRemove(context.Background(), ""); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("qos rm without a job: %v", err)
	}
}
