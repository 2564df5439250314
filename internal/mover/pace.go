package mover

import "time"

// Pacer spreads the starts of moves so that what was started stays within
// Rate units per second since Start (bytes of archives or restores, or
// files released): a move of n units may start at Due(), and then calls
// Add(n). A Rate of 0 or less is no cap. It decides; callers wait.
type Pacer struct {
	Start   time.Time
	Rate    float64
	Started float64 // units of the moves started so far
}

// Due returns when the next move may start.
func (p *Pacer) Due() time.Time {
	if p.Rate <= 0 {
		return p.Start
	}
	return p.Start.Add(time.Duration(p.Started / p.Rate * float64(time.Second)))
}

// Add counts a move of n units as started.
func (p *Pacer) Add(n float64) { p.Started += n }
