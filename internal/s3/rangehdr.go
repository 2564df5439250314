package s3

import (
	"strconv"
	"strings"
)

// byteRange is a satisfiable byte range of an object.
type byteRange struct {
	Start, Length int64
}

// parseRange interprets a Range header against an object of size bytes,
// as S3 does: one range "bytes=A-B", "bytes=A-" or a suffix "bytes=-N".
// It returns ok=false (serve the whole object) for an absent or
// syntactically invalid header and for several ranges, and ErrInvalidRange
// (416) for a well-formed range that the object cannot satisfy.
func parseRange(h string, size int64) (r byteRange, ok bool, err error) {
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !found || strings.Contains(spec, ",") {
		return byteRange{}, false, nil
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return byteRange{}, false, nil
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	unsatisfiable := apiErr(ErrInvalidRange, "The requested range %q is not satisfiable for an object of %d bytes", truncate(h, 64), size)
	if first == "" {
		n, valid := parseDigits(last)
		if !valid {
			return byteRange{}, false, nil
		}
		if n == 0 || size == 0 {
			return byteRange{}, false, unsatisfiable
		}
		n = min(n, size)
		return byteRange{Start: size - n, Length: n}, true, nil
	}
	start, valid := parseDigits(first)
	if !valid {
		return byteRange{}, false, nil
	}
	end := size - 1
	if last != "" {
		e, valid := parseDigits(last)
		if !valid || e < start {
			return byteRange{}, false, nil
		}
		end = min(e, size-1)
	}
	if start >= size {
		return byteRange{}, false, unsatisfiable
	}
	return byteRange{Start: start, Length: end - start + 1}, true, nil
}

// parseCopyRange parses x-amz-copy-source-range, which must be
// "bytes=first-last" within the source.
func parseCopyRange(h string, size int64) (byteRange, error) {
	spec, found := strings.CutPrefix(h, "bytes=")
	first, last, found2 := strings.Cut(spec, "-")
	s, ok1 := parseDigits(first)
	e, ok2 := parseDigits(last)
	if !found || !found2 || !ok1 || !ok2 || e < s {
		return byteRange{}, apiErr(ErrInvalidArgument, "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy")
	}
	if e >= size {
		return byteRange{}, apiErr(ErrInvalidRange, "The x-amz-copy-source-range %q is outside the source object of %d bytes", h, size)
	}
	return byteRange{Start: s, Length: e - s + 1}, nil
}

// parseDigits parses a non-negative decimal number of at most 18 digits.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
