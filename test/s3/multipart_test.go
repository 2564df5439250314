package s3

import (
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
	g.runScript(t, py, "partNumber", partReadScript, g.clientEnv(t))
	g.alive()
}

// completeScript checks CompleteMultipartUpload with boto3: a repeated
// Complete answers as the first one did, a part listed twice counts once
// (the last entry), correct composite and full-object checksums are
// accepted and kept, wrong ones refused, and UploadPart echoes the
// checksum it was sent (issue 19).
const completeScript = `
import os, boto3, botocore, hashlib, base64, zlib
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))

def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    raise AssertionError("no error from %s %s" % (fn.__name__, kw))

def b64(b):
    return base64.b64encode(b).decode()

s3.create_bucket(Bucket="mpu")
parts = [os.urandom(5 << 20), os.urandom(1000)]
md5 = lambda b: hashlib.md5(b).digest()
mp_etag = '"%s-2"' % hashlib.md5(b"".join(md5(p) for p in parts)).hexdigest()

# Repeated Complete; a part listed twice.
up = s3.create_multipart_upload(Bucket="mpu", Key="again")["UploadId"]
e = [s3.upload_part(Bucket="mpu", Key="again", UploadId=up, PartNumber=i + 1, Body=p)["ETag"] for i, p in enumerate(parts)]
lst = {"Parts": [{"PartNumber": 1, "ETag": e[0]}, {"PartNumber": 2, "ETag": e[1]}, {"PartNumber": 2, "ETag": e[1]}]}
r1 = s3.complete_multipart_upload(Bucket="mpu", Key="again", UploadId=up, MultipartUpload=lst)
assert r1["ETag"] == mp_etag, (r1["ETag"], mp_etag)
r2 = s3.complete_multipart_upload(Bucket="mpu", Key="again", UploadId=up, MultipartUpload=lst)
assert r2["ETag"] == r1["ETag"] and r2["Key"] == "again" and r2["Bucket"] == "mpu", r2
assert s3.get_object(Bucket="mpu", Key="again")["Body"].read() == b"".join(parts)
s3.put_object(Bucket="mpu", Key="again", Body=b"replaced")
assert code(s3.complete_multipart_upload, Bucket="mpu", Key="again", UploadId=up, MultipartUpload=lst) == "NoSuchUpload"

# Checksums: per part (echoed by UploadPart, listed in Complete) and of the object, composite or full.
fns = {"CRC32": lambda b: zlib.crc32(b).to_bytes(4, "big"), "SHA1": lambda b: hashlib.sha1(b).digest(), "SHA256": lambda b: hashlib.sha256(b).digest()}
try:
    from awscrt import checksums
    fns["CRC32C"] = lambda b: checksums.crc32c(b).to_bytes(4, "big")
except ImportError:
    print("no awscrt: CRC32C not checked")
for alg, fn in fns.items():
    comp = b64(fn(b"".join(fn(p) for p in parts))) + "-2"
    full = b64(fn(b"".join(parts)))
    for kind, value, recorded in [("composite", comp, comp), ("bare", comp[:-2], comp), ("full", full, full), ("none", None, comp)]:
        key = "ck-%s-%s" % (alg, kind)
        up = s3.create_multipart_upload(Bucket="mpu", Key=key, ChecksumAlgorithm=alg)["UploadId"]
        done = []
        for i, p in enumerate(parts):
            if i == 0:
                r = s3.upload_part(Bucket="mpu", Key=key, UploadId=up, PartNumber=1, Body=p, **{"Checksum" + alg: b64(fn(p))})
            else:
                r = s3.upload_part(Bucket="mpu", Key=key, UploadId=up, PartNumber=2, Body=p)  # the gateway computes it
            assert r.get("Checksum" + alg) == b64(fn(p)), (alg, i, r)
            done.append({"PartNumber": i + 1, "ETag": r["ETag"], "Checksum" + alg: b64(fn(p))})
        lp = s3.list_parts(Bucket="mpu", Key=key, UploadId=up)["Parts"]
        assert [p.get("Checksum" + alg) for p in lp] == [b64(fn(p)) for p in parts], lp
        bad = [dict(done[0]), done[1]]
        bad[0]["Checksum" + alg] = b64(fn(b"other"))
        assert code(s3.complete_multipart_upload, Bucket="mpu", Key=key, UploadId=up, MultipartUpload={"Parts": bad}) == "InvalidPart"
        if value is not None:
            assert code(s3.complete_multipart_upload, Bucket="mpu", Key=key, UploadId=up, MultipartUpload={"Parts": done}, **{"Checksum" + alg: b64(fn(b"wrong"))}) == "BadDigest"
            r = s3.complete_multipart_upload(Bucket="mpu", Key=key, UploadId=up, MultipartUpload={"Parts": done}, **{"Checksum" + alg: value})
        else:
            r = s3.complete_multipart_upload(Bucket="mpu", Key=key, UploadId=up, MultipartUpload={"Parts": done})
        assert r.get("Checksum" + alg) == recorded, (alg, kind, r)
        h = s3.head_object(Bucket="mpu", Key=key, ChecksumMode="ENABLED")
        assert h.get("Checksum" + alg) == recorded, (alg, kind, h)
        assert s3.get_object(Bucket="mpu", Key=key)["Body"].read() == b"".join(parts)
print("OK")
`

func TestCompleteMultipart(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	g.runScript(t, py, "Complete", completeScript, g.clientEnv(t))
	g.alive()
}
