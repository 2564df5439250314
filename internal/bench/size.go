package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// Size is a byte count that prints and parses with binary units
// ("150KiB", "1MiB", "47008").
type Size int64

var units = []struct {
	name string
	n    int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

func (s Size) String() string {
	for _, u := range units {
		if s >= Size(u.n) && int64(s)%u.n == 0 {
			return fmt.Sprintf("%d%s", int64(s)/u.n, u.name)
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// ParseSize parses a size: a number with an optional unit, binary (KiB,
// MiB, GiB, TiB; K, M, G, T) or decimal (kB, MB, GB, TB).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("bench: bad size %q", s)
	}
	mult := map[string]float64{
		"": 1, "B": 1,
		"K": 1 << 10, "KiB": 1 << 10, "KB": 1e3, "kB": 1e3,
		"M": 1 << 20, "MiB": 1 << 20, "MB": 1e6,
		"G": 1 << 30, "GiB": 1 << 30, "GB": 1e9,
		"T": 1 << 40, "TiB": 1 << 40, "TB": 1e12,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("bench: bad size %q: unknown unit %q", s, unit)
	}
	return int64(f * mult), nil
}

// SizeDist is the distribution of sample sizes: fixed (Min == Max) or
// uniform in [Min, Max]. It parses from "150KiB" or "100KiB-200KiB".
type SizeDist struct{ Min, Max int64 }

// ParseSizeDist parses "SIZE" or "MIN-MAX".
func ParseSizeDist(s string) (SizeDist, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		hi = lo
	}
	a, err := ParseSize(lo)
	if err != nil {
		return SizeDist{}, err
	}
	b, err := ParseSize(hi)
	if err != nil {
		return SizeDist{}, err
	}
	if a < 1 || b < a {
		return SizeDist{}, fmt.Errorf("bench: bad size distribution %q", s)
	}
	return SizeDist{a, b}, nil
}

func (d SizeDist) String() string {
	if d.Min == d.Max {
		return Size(d.Min).String()
	}
	return Size(d.Min).String() + "-" + Size(d.Max).String()
}

// Of returns the size of sample i: a fixed function of i, so that every
// run and every reader agrees on it.
func (d SizeDist) Of(i int) int64 {
	if d.Max == d.Min {
		return d.Min
	}
	h := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return d.Min + int64(h%uint64(d.Max-d.Min+1))
}
