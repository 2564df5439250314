package s3

import (
	"encoding/json"
	"testing"
)

// corsScript configures CORS with boto3 and sends preflights and
// cross-origin requests as a browser does (issue 19: every preflight was
// refused as for a bucket without CORS).
const corsScript = `
import os, boto3, botocore, urllib.request, urllib.error
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))

def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    raise AssertionError("no error from %s %s" % (fn.__name__, kw))

def fetch(url, method="GET", headers={}):
    try:
        r = urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers))
        return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()

def preflight(url, origin, method, headers=None):
    h = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers:
        h["Access-Control-Request-Headers"] = headers
    return fetch(url, "OPTIONS", h)

s3.create_bucket(Bucket="web")
s3.put_object(Bucket="web", Key="obj", Body=b"hi")
obj = ep + "/web/obj"
assert code(s3.get_bucket_cors, Bucket="web") == "NoSuchCORSConfiguration"
st, hd, body = preflight(obj, "https://app.example.com", "GET")
assert st == 403 and b"CORS is not enabled" in body, (st, body)

rules = [{"ID": "app", "AllowedOrigins": ["https://app.example.com"], "AllowedMethods": ["GET", "PUT", "HEAD"], "AllowedHeaders": ["*"], "ExposeHeaders": ["ETag", "x-amz-version-id"], "MaxAgeSeconds": 600},
         {"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]
s3.put_bucket_cors(Bucket="web", CORSConfiguration={"CORSRules": rules})
assert s3.get_bucket_cors(Bucket="web")["CORSRules"] == rules, s3.get_bucket_cors(Bucket="web")["CORSRules"]
assert code(s3.put_bucket_cors, Bucket="web", CORSConfiguration={"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]}) == "InvalidRequest"
assert code(s3.put_bucket_cors, Bucket="web", CORSConfiguration={"CORSRules": [{"AllowedOrigins": ["*.*"], "AllowedMethods": ["GET"]}]}) == "InvalidRequest"

# Preflights are answered from the rules.
st, hd, body = preflight(obj, "https://app.example.com", "PUT", "content-type,x-amz-date")
assert st == 200 and hd["Access-Control-Allow-Origin"] == "https://app.example.com", (st, hd, body)
assert hd["Access-Control-Allow-Methods"] == "GET, PUT, HEAD" and hd["Access-Control-Allow-Headers"] == "content-type, x-amz-date", hd
assert hd["Access-Control-Max-Age"] == "600" and hd["Access-Control-Expose-Headers"] == "ETag, x-amz-version-id" and hd["Access-Control-Allow-Credentials"] == "true", hd
st, hd, _ = preflight(obj, "https://other.example", "GET")
assert st == 200 and hd["Access-Control-Allow-Origin"] == "*" and hd["Access-Control-Allow-Methods"] == "GET", hd
st, hd, body = preflight(obj, "https://other.example", "PUT")
assert st == 403 and b"<Code>AccessForbidden</Code>" in body and "Access-Control-Allow-Origin" not in hd, (st, hd, body)
st, _, _ = fetch(obj, "OPTIONS", {"Origin": "https://app.example.com"})
assert st == 400
# A presigned URL gets the same answer (the preflight carries no signature).
url = s3.generate_presigned_url("put_object", Params={"Bucket": "web", "Key": "up"}, ExpiresIn=600)
assert preflight(url, "https://app.example.com", "PUT", "content-type")[0] == 200

# Actual requests with an Origin get the headers, errors included.
url = s3.generate_presigned_url("get_object", Params={"Bucket": "web", "Key": "obj"}, ExpiresIn=600)
st, hd, body = fetch(url, "GET", {"Origin": "https://app.example.com"})
assert st == 200 and body == b"hi" and hd["Access-Control-Allow-Origin"] == "https://app.example.com" and hd["Access-Control-Expose-Headers"] == "ETag, x-amz-version-id", hd
st, hd, body = fetch(ep + "/web/missing", "GET", {"Origin": "https://other.example"})
assert st in (403, 404) and hd["Access-Control-Allow-Origin"] == "*", (st, hd)
st, hd, _ = fetch(url, "GET")
assert st == 200 and "Access-Control-Allow-Origin" not in hd, hd
url = s3.generate_presigned_url("put_object", Params={"Bucket": "web", "Key": "up"}, ExpiresIn=600)
r = urllib.request.urlopen(urllib.request.Request(url, data=b"from a browser", method="PUT", headers={"Origin": "https://app.example.com"}))
assert r.status == 200 and r.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
assert s3.get_object(Bucket="web", Key="up")["Body"].read() == b"from a browser"

s3.delete_bucket_cors(Bucket="web")
assert code(s3.get_bucket_cors, Bucket="web") == "NoSuchCORSConfiguration"
assert preflight(obj, "https://app.example.com", "GET")[0] == 403
print("OK")
`

func TestCORS(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	env := g.clientEnv(t)
	g.runScript(t, py, "CORS", corsScript, env)
	aws := awsBin(t)
	mustRun(t, env, aws, "--endpoint-url", g.endpoint, "s3api", "put-bucket-cors", "--bucket", "web", "--cors-configuration",
		`{"CORSRules":[{"AllowedOrigins":["https://ui.example"],"AllowedMethods":["GET"]}]}`)
	out := mustRun(t, env, aws, "--endpoint-url", g.endpoint, "s3api", "get-bucket-cors", "--bucket", "web")
	var res struct {
		CORSRules []struct{ AllowedOrigins, AllowedMethods []string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.CORSRules) != 1 || res.CORSRules[0].AllowedOrigins[0] != "https://ui.example" {
		t.Errorf("aws s3api get-bucket-cors: %s (%v)", out, err)
	}
	g.alive()
}
