package s3

import (
	"net/http"
	"testing"
)

func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	tests := []struct {
		h    http.Header
		code string
		st   int
	}{
		{http.Header{}, "BadRequest", 400},
		{http.Header{"Access-Control-Request-Method": {"GET"}}, "BadRequest", 400},
		{http.Header{"Origin": {"https://example.com"}}, "BadRequest", 400},
		{http.Header{"Origin": {"https://example.com"}, "Access-Control-Request-Method": {"GET"}}, "AccessForbidden", 403},
	}
	for _, tc := range tests {
		err := corsPreflight(tc.h)
		if !isCode(err, tc.code) || err.(*APIError).Status != tc.st {
			t.Errorf("%v: %v, want %d %s", tc.h, err, tc.st, tc.code)
		}
	}
}
