package s3

import (
	"strings"
	"testing"
)

// partReadScript reads a multipart object part by part with boto3
// (GetObject and HeadObject with PartNumber, as SDK transfer managers do):
// each part's bytes, Content-Range and the parts count (issue 19: the
// whole object came back for every part).
const partReadScript = `
import os, boto3, botocore
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))

def err(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    raise AssertionError("no error from %s %s" % (fn.__name__, kw))

s3.create_bucket(Bucket="parts")
parts = [os.urandom(5 << 20), os.urandom(5 << 20), os.urandom((1 << 20) + 7)]
up = s3.create_multipart_upload(Bucket="parts", Key="mp")["UploadId"]
done = [{"PartNumber": i + 1, "ETag": s3.upload_part(Bucket="parts", Key="mp", UploadId=up, PartNumber=i + 1, Body=p)["ETag"]} for i, p in enumerate(parts)]
etag = s3.complete_multipart_upload(Bucket="parts", Key="mp", UploadId=up, MultipartUpload={"Parts": done})["ETag"]
total = sum(len(p) for p in parts)
start = 0
for i, p in enumerate(parts):
    n = i + 1
    r = s3.get_object(Bucket="parts", Key="mp", PartNumber=n)
    assert r["Body"].read() == p, n
    rng = "bytes %d-%d/%d" % (start, start + len(p) - 1, total)
    assert r["ContentLength"] == len(p) and r["ContentRange"] == rng and r["PartsCount"] == 3 and r["ETag"] == etag, (n, r)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
    h = s3.head_object(Bucket="parts", Key="mp", PartNumber=n)
    # (this botocore does not model HeadObject's Content-Range)
    assert h["ContentLength"] == len(p) and h["ResponseMetadata"]["HTTPHeaders"]["content-range"] == rng and h["PartsCount"] == 3, (n, h)
    start += len(p)
assert err(s3.get_object, Bucket="parts", Key="mp", PartNumber=4) == ("InvalidPartNumber", 400)
assert err(s3.head_object, Bucket="parts", Key="mp", PartNumber=4) == ("400", 400)
assert err(s3.get_object, Bucket="parts", Key="mp", PartNumber=1, Range="bytes=0-1")[0] == "InvalidRequest"
assert s3.get_object(Bucket="parts", Key="mp")["Body"].read() == b"".join(parts)

# A single-part object is one part.
s3.put_object(Bucket="parts", Key="single", Body=b"0123456789")
r = s3.get_object(Bucket="parts", Key="single", PartNumber=1)
assert r["Body"].read() == b"0123456789" and r["ContentLength"] == 10 and r["ContentRange"] == "bytes 0-9/10", r
assert err(s3.get_object, Bucket="parts", Key="single", PartNumber=2) == ("InvalidPartNumber", 400)
s3.put_object(Bucket="parts", Key="empty", Body=b"")
assert s3.get_object(Bucket="parts", Key="empty", PartNumber=1)["Body"].read() == b""
# Replacing a multipart object by a single PUT leaves no stale parts.
s3.put_object(Bucket="parts", Key="mp", Body=b"now small")
assert s3.get_object(Bucket="parts", Key="mp", PartNumber=1)["Body"].read() == b"now small"
assert err(s3.get_object, Bucket="parts", Key="mp", PartNumber=2) == ("InvalidPartNumber", 400)
print("OK")
`

func TestPartNumberReads(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	r := runTool(t, g.clientEnv(t), []byte(partReadScript), py, "-")
	if r.code != 0 || !strings.Contains(r.stdout, "OK") {
		t.Fatalf("partNumber script failed (exit %d):\n%s\n%s\ngateway logs:\n%s", r.code, r.stdout, r.stderr, lastLines(g.logs(), 30))
	}
	g.alive()
}
