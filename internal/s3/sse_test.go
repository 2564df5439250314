package s3

import (
	"net/http"
	"testing"
)

func TestRefuseSSE(t *testing.T) {
	t.Parallel()
	refused := []http.Header{
		{"X-Amz-Server-Side-Encryption": {"AES256"}},
		{"X-Amz-Server-Side-Encryption": {"aws:kms"}, "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id": {"k"}},
		{"X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id": {"k"}},
		{"X-Amz-Server-Side-Encryption-Bucket-Key-Enabled": {"true"}},
		{"X-Amz-Server-Side-Encryption-Customer-Algorithm": {"AES256"}, "X-Amz-Server-Side-Encryption-Customer-Key": {"a2V5"}},
		{"X-Amz-Copy-Source-Server-Side-Encryption-Customer-Algorithm": {"AES256"}},
	}
	for _, h := range refused {
		if err := refuseSSE(h); !isCode(err, "NotImplemented") {
			t.Errorf("%v: %v, want NotImplemented", h, err)
		}
	}
	for _, h := range []http.Header{{}, {"X-Amz-Server-Side-Encryption": {""}}, {"X-Amz-Storage-Class": {"STANDARD"}}} {
		if err := refuseSSE(h); err != nil {
			t.Errorf("%v: %v", h, err)
		}
	}
}
