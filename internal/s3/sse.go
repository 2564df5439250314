package s3

import (
	"net/http"
	"strings"
)

// Server-side encryption: Sluice stores objects as they are sent, so a
// request asking for encryption at rest (SSE-S3, SSE-KMS) or with a
// customer key (SSE-C, also for a copy source) is refused with 501
// NotImplemented before anything is stored, never accepted and ignored:
// a client must not believe data is protected when it is not.

// sseHeaderPrefixes name the request headers of server-side encryption.
var sseHeaderPrefixes = []string{"X-Amz-Server-Side-Encryption", "X-Amz-Copy-Source-Server-Side-Encryption"}

// sseHeader returns the first server-side encryption header of h with a
// value ("" if none).
func sseHeader(h http.Header) string {
	for name, vals := range h {
		for _, p := range sseHeaderPrefixes {
			if strings.HasPrefix(name, p) && len(vals) > 0 && strings.TrimSpace(strings.Join(vals, "")) != "" {
				return name
			}
		}
	}
	return ""
}

// refuseSSE fails a request that asks for server-side encryption.
func refuseSSE(h http.Header) error {
	name := sseHeader(h)
	if name == "" {
		return nil
	}
	what := "SSE-S3 and SSE-KMS"
	if strings.Contains(name, "Customer") {
		what = "SSE-C (customer-provided keys)"
	}
	return apiErr(ErrNotImplemented, "Server-side encryption is not supported by Sluice (%s: %s); objects are stored unencrypted, so the request was refused", strings.ToLower(name), what)
}
