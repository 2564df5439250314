package s3

import (
	"testing"
)

// attributesScript checks GetObjectAttributes with boto3 (issue 19: it
// answered 501).
const attributesScript = `
import os, io, base64, hashlib, zlib, boto3, botocore
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))
ALL = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]

def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    raise AssertionError("no error from %s %s" % (fn.__name__, kw))

s3.create_bucket(Bucket="attrs")
s3.put_object(Bucket="attrs", Key="small", Body=b"hello", ChecksumSHA256=base64.b64encode(hashlib.sha256(b"hello").digest()).decode())
r = s3.get_object_attributes(Bucket="attrs", Key="small", ObjectAttributes=ALL)
assert r["ETag"] == hashlib.md5(b"hello").hexdigest() and r["ObjectSize"] == 5 and r["StorageClass"] == "STANDARD", r
assert r["Checksum"]["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(b"hello").digest()).decode(), r
assert "ObjectParts" not in r and "LastModified" in r, r
r = s3.get_object_attributes(Bucket="attrs", Key="small", ObjectAttributes=["ObjectSize"])
assert r["ObjectSize"] == 5 and "ETag" not in r and "Checksum" not in r, r

# A multipart object: its parts, a page at a time.
sizes = [5 << 20, 5 << 20, 1000]
u = s3.create_multipart_upload(Bucket="attrs", Key="mp", ChecksumAlgorithm="CRC32")["UploadId"]
parts = []
for i, n in enumerate(sizes):
    data = os.urandom(n)
    ck = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    e = s3.upload_part(Bucket="attrs", Key="mp", UploadId=u, PartNumber=i + 1, Body=data, ChecksumCRC32=ck)["ETag"]
    parts.append({"PartNumber": i + 1, "ETag": e, "ChecksumCRC32": ck})
s3.complete_multipart_upload(Bucket="attrs", Key="mp", UploadId=u, MultipartUpload={"Parts": parts})
r = s3.get_object_attributes(Bucket="attrs", Key="mp", ObjectAttributes=ALL, MaxParts=2)
op = r["ObjectParts"]
assert r["ETag"].endswith("-3") and r["ObjectSize"] == sum(sizes), r
assert "ChecksumCRC32" in r["Checksum"], r
assert op["TotalPartsCount"] == 3 and op["IsTruncated"] and op["NextPartNumberMarker"] == 2, op
assert [(p["PartNumber"], p["Size"]) for p in op["Parts"]] == [(1, sizes[0]), (2, sizes[1])], op
op = s3.get_object_attributes(Bucket="attrs", Key="mp", ObjectAttributes=["ObjectParts"], PartNumberMarker=2)["ObjectParts"]
assert not op["IsTruncated"] and [(p["PartNumber"], p["Size"]) for p in op["Parts"]] == [(3, 1000)], op

# Versions and errors.
s3.put_bucket_versioning(Bucket="attrs", VersioningConfiguration={"Status": "Enabled"})
v1 = s3.put_object(Bucket="attrs", Key="v", Body=b"one")["VersionId"]
s3.put_object(Bucket="attrs", Key="v", Body=b"three")
r = s3.get_object_attributes(Bucket="attrs", Key="v", VersionId=v1, ObjectAttributes=["ObjectSize", "ETag"])
assert r["ObjectSize"] == 3 and r["VersionId"] == v1 and r["ETag"] == hashlib.md5(b"one").hexdigest(), r
assert s3.get_object_attributes(Bucket="attrs", Key="v", ObjectAttributes=["ObjectSize"])["ObjectSize"] == 5
assert code(s3.get_object_attributes, Bucket="attrs", Key="missing", ObjectAttributes=ALL) == "NoSuchKey"
assert code(s3.get_object_attributes, Bucket="attrs", Key="v", ObjectAttributes=["Bogus"]) == "InvalidArgument"
print("OK")
`

func TestObjectAttributes(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	g.runScript(t, py, "attributes", attributesScript, g.clientEnv(t))
	g.alive()
}
