package advise

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

// defaultModel is a calibration of `sluice serve` (4 targets on one disk)
// on the 2-vCPU development VM, the model `sluice advise` uses when it is
// given none: its provenance is in the file (docs/profile.md).
//
//go:embed model.json
var defaultModel []byte

// DefaultModel returns the built-in model.
func DefaultModel() (*Model, error) {
	var m Model
	if err := json.Unmarshal(defaultModel, &m); err != nil {
		return nil, fmt.Errorf("advise: the built-in model: %w", err)
	}
	return &m, nil
}
