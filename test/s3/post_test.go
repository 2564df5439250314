package s3

import (
	"testing"
)

// postScript uploads with HTML-form POSTs built from boto3's
// generate_presigned_post, as a browser sends them (issue 19: POST object
// uploads answered 501).
const postScript = `
import os, time, uuid, urllib.request, urllib.error, boto3, botocore
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))

class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **kw):
        return None
opener = urllib.request.build_opener(NoRedirect)

def post(url, fields, data, filename="file.bin", extra=()):
    b = uuid.uuid4().hex.encode()
    body = b""
    for k, v in list(fields.items()) + list(extra):
        body += b"--" + b + b'\r\nContent-Disposition: form-data; name="' + k.encode() + b'"\r\n\r\n' + v.encode() + b"\r\n"
    body += b"--" + b + b'\r\nContent-Disposition: form-data; name="file"; filename="' + filename.encode() + b'"\r\nContent-Type: application/octet-stream\r\n\r\n' + data + b"\r\n--" + b + b"--\r\n"
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "multipart/form-data; boundary=" + b.decode()})
    try:
        r = opener.open(req)
        return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()

s3.create_bucket(Bucket="forms")
fields = {"acl": "public-read", "Content-Type": "text/plain", "success_action_status": "201", "x-amz-meta-who": "browser"}
conds = [{"acl": "public-read"}, ["starts-with", "$key", "uploads/"], ["starts-with", "$Content-Type", "text/"],
         {"success_action_status": "201"}, ["content-length-range", 1, 100], {"x-amz-meta-who": "browser"}]
p = s3.generate_presigned_post("forms", "uploads/${filename}", Fields=dict(fields), Conditions=conds, ExpiresIn=600)
assert p["fields"]["x-amz-algorithm"] == "AWS4-HMAC-SHA256", p
st, hd, body = post(p["url"], p["fields"], b"hello form", filename="hello.txt")
assert st == 201 and b"<Key>uploads/hello.txt</Key>" in body and b"<Bucket>forms</Bucket>" in body, (st, body)
o = s3.get_object(Bucket="forms", Key="uploads/hello.txt")
assert o["Body"].read() == b"hello form" and o["ContentType"] == "text/plain" and o["Metadata"] == {"who": "browser"}, o
assert hd["ETag"] == o["ETag"], (hd, o)
assert urllib.request.urlopen(ep + "/forms/uploads/hello.txt").read() == b"hello form"  # acl public-read

def denied(st, body, what):
    assert st == 403 and what.encode() in body, (st, body)

# The policy holds: size range, key prefix, every field named.
st, _, body = post(p["url"], p["fields"], b"x" * 101)
assert st == 400 and b"EntityTooLarge" in body, (st, body)
st, _, body = post(p["url"], p["fields"], b"")
assert st == 400 and b"EntityTooSmall" in body, (st, body)
f = dict(p["fields"], key="elsewhere/x")
denied(*post(p["url"], f, b"data")[::2], "Policy Condition failed")
f = dict(p["fields"], **{"Content-Type": "image/png"})
denied(*post(p["url"], f, b"data")[::2], "Policy Condition failed")
denied(*post(p["url"], p["fields"], b"data", extra=[("x-amz-meta-extra", "1")])[::2], "Extra input fields")
f = dict(p["fields"], **{"x-amz-signature": "0" * 64})
st, _, body = post(p["url"], f, b"data")
assert st == 403 and b"SignatureDoesNotMatch" in body, body
assert "elsewhere/x" not in [o["Key"] for o in s3.list_objects_v2(Bucket="forms").get("Contents", [])]

# Expired policies, redirects, the default 204.
short = s3.generate_presigned_post("forms", "k", ExpiresIn=1)
time.sleep(2)
denied(*post(short["url"], short["fields"], b"late")[::2], "Policy expired")
r = s3.generate_presigned_post("forms", "redir", Fields={"success_action_redirect": "https://app.example.com/done"},
                               Conditions=[{"success_action_redirect": "https://app.example.com/done"}], ExpiresIn=600)
st, hd, _ = post(r["url"], r["fields"], b"r")
assert st == 303 and hd["Location"].startswith("https://app.example.com/done?") and "key=redir" in hd["Location"] and "bucket=forms" in hd["Location"], (st, hd)
d = s3.generate_presigned_post("forms", "plain", ExpiresIn=600)
st, _, _ = post(d["url"], d["fields"], b"plain data")
assert st == 204 and s3.get_object(Bucket="forms", Key="plain")["Body"].read() == b"plain data"

# A form without a policy is anonymous: only a public-read-write bucket takes it.
st, _, body = post(ep + "/forms", {"key": "anon"}, b"a")
assert st == 403 and b"AccessDenied" in body, (st, body)
s3.create_bucket(Bucket="dropbox", ACL="public-read-write")
st, _, _ = post(ep + "/dropbox", {"key": "anon"}, b"a")
assert st == 204 and s3.get_object(Bucket="dropbox", Key="anon")["Body"].read() == b"a"
print("OK")
`

func TestPostObject(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	g.runScript(t, py, "POST", postScript, g.clientEnv(t))
	g.alive()
}
