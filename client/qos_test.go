package client

import (
	"errors"
	"testing"

	"github.com/sluice-fs/sluice/internal/errs"
	"github.com/sluice-fs/sluice/internal/wire"
)

// TestQosTag: the options' job and class win; the environment fills what
// they leave empty; no class is "none" (training at the targets); an
// unknown class is refused.
func TestQosTag(t *testing.T) {
	for _, tc := range []struct {
		opts             Options
		envJob, envClass string
		want             wire.QosTag
		err              error
	}{
		{Options{}, "", "", wire.QosTag{}, nil},
		{Options{Job: "a", Class: "interactive"}, "b", "background", wire.QosTag{Job: "a", Class: 1}, nil},
		{Options{}, "b", "checkpoint", wire.QosTag{Job: "b", Class: 3}, nil},
		{Options{Job: "a"}, "", "background", wire.QosTag{Job: "a", Class: 4}, nil},
		{Options{Class: "training"}, "", "", wire.QosTag{Class: 2}, nil},
		{Options{Class: "urgent"}, "", "", wire.QosTag{}, errs.ErrInvalid},
		{Options{}, "", "fast", wire.QosTag{}, errs.ErrInvalid},
	} {
		t.Setenv(EnvQosJob, tc.envJob)
		t.Setenv(EnvQosClass, tc.envClass)
		got, err := tc.opts.qosTag()
		if got != tc.want || (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("%+v with env %q %q: %+v, %v; want %+v, %v", tc.opts, tc.envJob, tc.envClass, got, err, tc.want, tc.err)
		}
	}
}
