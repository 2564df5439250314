package kv_test

import (
	"testing"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/kv/kvtest"
)

func TestMemoryConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.DB { return kv.NewMemory() })
}
