package proctest

import (
	"io"
	"net/http"
	"testing"
)

// Metrics returns the text of a server's /metrics page at admin (the
// host:port its "admin on" line printed); it fails the test if the page
// cannot be read.
func Metrics(tb testing.TB, admin string) string {
	tb.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET http://%s/metrics: %s", admin, resp.Status)
	}
	return string(body)
}
