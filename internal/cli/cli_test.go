package cli

import "testing"

func TestParseSize(t *testing.T) {
	good := map[string]int64{"0": 0, "65536": 65536, "64K": 64 << 10, "1M": 1 << 20, "1MiB": 1 << 20,
		"4g": 4 << 30, "2T": 2 << 40, "1mb": 1 << 20}
	for in, want := range good {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-1", "1.5M", "lots", "1X", "12 M3"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded", in)
		}
	}
}
