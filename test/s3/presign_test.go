package s3

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// presignScript checks presigned URLs made by boto3 and fetched with
// urllib (issue 19): lifetimes out of range or over get 403 AccessDenied
// (not 400), and OPTIONS on a presigned URL is answered as a CORS
// preflight is by S3 for a bucket without a CORS configuration, not
// refused for its signature.
const presignScript = `
import os, time, boto3, urllib.request, urllib.error
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))
s3.create_bucket(Bucket="pre")
s3.put_object(Bucket="pre", Key="obj", Body=b"presigned")

def fetch(url, method="GET", headers={}):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers)) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

def url(expires):
    return s3.generate_presigned_url("get_object", Params={"Bucket": "pre", "Key": "obj"}, ExpiresIn=expires)

assert fetch(url(100000)) == (200, b"presigned")
# (botocore's CRT signer refuses to presign for 0 or fewer seconds: those
# are checked with the test's own signer below)
for expires, msg in [(609901, b"less than a week")]:
    st, body = fetch(url(expires))
    assert st == 403 and b"<Code>AccessDenied</Code>" in body and msg in body, (expires, st, body)
short = url(1)
time.sleep(2)
st, body = fetch(short)
assert st == 403 and b"<Code>AccessDenied</Code>" in body and b"Request has expired" in body, (st, body)

# OPTIONS: a CORS preflight, whatever the URL's signature.
for u in [url(100000), url(609901), ep + "/pre/obj"]:
    st, body = fetch(u, "OPTIONS")
    assert st == 400 and b"Origin request header needed" in body, (u, st, body)
    st, body = fetch(u, "OPTIONS", {"Origin": "https://example.com", "Access-Control-Request-Method": "GET"})
    assert st == 403 and b"<Code>AccessForbidden</Code>" in body and b"CORSResponse" in body, (u, st, body)
print("OK")
`

func TestPresignedURLs(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	g.runScript(t, py, "presign", presignScript, g.clientEnv(t))
	c := newS3Client(g.endpoint)
	for _, tc := range []struct {
		expires time.Duration
		msg     string
	}{{-7 * time.Second, "non-negative"}, {0, "expired"}, {604801 * time.Second, "less than a week"}} {
		resp, err := http.Get(c.presign("GET", "/pre/obj", time.Now(), tc.expires))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		expectError(t, resp, body, 403, "AccessDenied")
		if !strings.Contains(string(body), tc.msg) {
			t.Errorf("X-Amz-Expires %v: %s", tc.expires, body)
		}
	}
	g.alive()
}
