package s3

import (
	"testing"
)

// conditionalScript checks conditional writes with boto3 (this boto3 has
// no IfNoneMatch parameter, so a hook adds the headers, signed): PutObject
// and CompleteMultipartUpload with If-None-Match (an ETag or *) and
// If-Match (issue 19: an ETag in If-None-Match got 501, and Complete
// ignored it).
const conditionalScript = `
import os, boto3, botocore
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))
extra = {}
def add_headers(request, **kw):
    for k, v in extra.items():
        request.headers[k] = v
s3.meta.events.register("before-sign.s3.*", add_headers)

def cond(headers, fn, *a, **kw):
    extra.clear()
    extra.update(headers)
    try:
        return fn(*a, **kw)
    finally:
        extra.clear()

def code(headers, fn, *a, **kw):
    try:
        cond(headers, fn, *a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    raise AssertionError("no error from %s %s %s" % (fn.__name__, headers, kw))

def body(k):
    return s3.get_object(Bucket="cond", Key=k)["Body"].read()

s3.create_bucket(Bucket="cond")
e1 = s3.put_object(Bucket="cond", Key="k", Body=b"v1")["ETag"]
assert code({"If-None-Match": e1}, s3.put_object, Bucket="cond", Key="k", Body=b"v2") == "PreconditionFailed"
assert code({"If-None-Match": '"other", ' + e1}, s3.put_object, Bucket="cond", Key="k", Body=b"v2") == "PreconditionFailed"
assert code({"If-None-Match": "*"}, s3.put_object, Bucket="cond", Key="k", Body=b"v2") == "PreconditionFailed"
assert body("k") == b"v1"
e2 = cond({"If-None-Match": '"other"'}, s3.put_object, Bucket="cond", Key="k", Body=b"v2")["ETag"]
assert body("k") == b"v2"
cond({"If-None-Match": "*"}, s3.put_object, Bucket="cond", Key="new", Body=b"n")
assert code({"If-Match": e1}, s3.put_object, Bucket="cond", Key="k", Body=b"v3") == "PreconditionFailed"
assert code({"If-Match": e1}, s3.put_object, Bucket="cond", Key="missing", Body=b"v3") == "NoSuchKey"
cond({"If-Match": e2}, s3.put_object, Bucket="cond", Key="k", Body=b"v3")
e3 = s3.head_object(Bucket="cond", Key="k")["ETag"]

def upload(key):
    up = s3.create_multipart_upload(Bucket="cond", Key=key)["UploadId"]
    e = s3.upload_part(Bucket="cond", Key=key, UploadId=up, PartNumber=1, Body=b"multipart " + key.encode())["ETag"]
    return up, {"Parts": [{"PartNumber": 1, "ETag": e}]}

up, parts = upload("k")
for h in [{"If-None-Match": "*"}, {"If-None-Match": e3}, {"If-Match": e1}]:
    assert code(h, s3.complete_multipart_upload, Bucket="cond", Key="k", UploadId=up, MultipartUpload=parts) == "PreconditionFailed", h
assert body("k") == b"v3"
cond({"If-Match": e3, "If-None-Match": e1}, s3.complete_multipart_upload, Bucket="cond", Key="k", UploadId=up, MultipartUpload=parts)
assert body("k") == b"multipart k"
up, parts = upload("fresh")
cond({"If-None-Match": "*"}, s3.complete_multipart_upload, Bucket="cond", Key="fresh", UploadId=up, MultipartUpload=parts)
assert body("fresh") == b"multipart fresh"
print("OK")
`

func TestConditionalWrites(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	g.runScript(t, py, "conditional", conditionalScript, g.clientEnv(t))
	g.alive()
}
