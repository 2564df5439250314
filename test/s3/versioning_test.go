package s3

import (
	"context"
	"io"
	"testing"
)

// versioningScript exercises bucket versioning with boto3 (issue 19:
// ListObjectVersions answered 501, and there were no versions).
const versioningScript = `
import os, boto3, botocore
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))

def err(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["ResponseMetadata"]["HTTPHeaders"]
    raise AssertionError("no error from %s %s" % (fn.__name__, kw))

def versions(prefix=""):
    r = s3.list_object_versions(Bucket="ver", Prefix=prefix)
    return [(v["Key"], v["VersionId"], v["IsLatest"]) for v in r.get("Versions", [])], [(m["Key"], m["VersionId"], m["IsLatest"]) for m in r.get("DeleteMarkers", [])]

def body(**kw):
    return s3.get_object(Bucket="ver", **kw)["Body"].read()

s3.create_bucket(Bucket="ver")
# Never versioned: the current objects, each the null version (what
# cleanup tools list).
s3.put_object(Bucket="ver", Key="plain", Body=b"p")
assert "Status" not in s3.get_bucket_versioning(Bucket="ver")
assert versions() == ([("plain", "null", True)], []), versions()
assert "VersionId" not in s3.put_object(Bucket="ver", Key="plain", Body=b"p")

s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
assert s3.get_bucket_versioning(Bucket="ver")["Status"] == "Enabled"
ids = [s3.put_object(Bucket="ver", Key="data/k", Body=b"v%d" % i)["VersionId"] for i in range(3)]
assert len(set(ids)) == 3 and "null" not in ids, ids
g = s3.get_object(Bucket="ver", Key="data/k")
assert g["Body"].read() == b"v2" and g["VersionId"] == ids[2], g
for i, v in enumerate(ids):
    assert body(Key="data/k", VersionId=v) == b"v%d" % i
    h = s3.head_object(Bucket="ver", Key="data/k", VersionId=v)
    assert h["VersionId"] == v and h["ContentLength"] == 2, h
assert versions("data/") == ([("data/k", ids[2], True), ("data/k", ids[1], False), ("data/k", ids[0], False)], []), versions("data/")
assert err(s3.get_object, Bucket="ver", Key="data/k", VersionId="0" * 32)[:2] == ("NoSuchVersion", 404)
assert err(s3.get_object, Bucket="ver", Key="data/k", VersionId="bogus")[:2] == ("InvalidArgument", 400)

# The null version written before versioning stays, noncurrent.
new = s3.put_object(Bucket="ver", Key="plain", Body=b"p2")["VersionId"]
assert versions("plain") == ([("plain", new, True), ("plain", "null", False)], []), versions("plain")
assert body(Key="plain", VersionId="null") == b"p" and body(Key="plain") == b"p2"

# A delete leaves a delete marker: GET is 404 with x-amz-delete-marker.
d = s3.delete_object(Bucket="ver", Key="data/k")
dm = d["VersionId"]
assert d["DeleteMarker"] and dm not in ids, d
c, st, hd = err(s3.get_object, Bucket="ver", Key="data/k")
assert (c, st, hd.get("x-amz-delete-marker"), hd.get("x-amz-version-id")) == ("NoSuchKey", 404, "true", dm), (c, st, hd)
assert err(s3.head_object, Bucket="ver", Key="data/k")[1] == 404
c, st, hd = err(s3.get_object, Bucket="ver", Key="data/k", VersionId=dm)
assert (c, st, hd.get("x-amz-delete-marker")) == ("MethodNotAllowed", 405, "true"), (c, st, hd)
assert versions("data/") == ([("data/k", ids[2], False), ("data/k", ids[1], False), ("data/k", ids[0], False)], [("data/k", dm, True)]), versions("data/")
assert "Contents" not in s3.list_objects_v2(Bucket="ver", Prefix="data/")
assert body(Key="data/k", VersionId=ids[1]) == b"v1"

# Deleting the marker brings the object back.
d = s3.delete_object(Bucket="ver", Key="data/k", VersionId=dm)
assert d["DeleteMarker"] and d["VersionId"] == dm, d
assert body(Key="data/k") == b"v2"

# Deleting a version removes it for good; deleting the current one makes
# the previous one current.
d = s3.delete_object(Bucket="ver", Key="data/k", VersionId=ids[1])
assert d["VersionId"] == ids[1] and not d.get("DeleteMarker"), d
assert versions("data/") == ([("data/k", ids[2], True), ("data/k", ids[0], False)], []), versions("data/")
assert err(s3.get_object, Bucket="ver", Key="data/k", VersionId=ids[1])[0] == "NoSuchVersion"
s3.delete_object(Bucket="ver", Key="data/k", VersionId=ids[2])
g = s3.get_object(Bucket="ver", Key="data/k")
assert g["Body"].read() == b"v0" and g["VersionId"] == ids[0], g

# Copy from a version; multipart uploads get a version too.
r = s3.copy_object(Bucket="ver", Key="copy", CopySource={"Bucket": "ver", "Key": "plain", "VersionId": "null"})
assert r["CopySourceVersionId"] == "null" and r["VersionId"] not in ("", "null"), r
assert body(Key="copy") == b"p"
u = s3.create_multipart_upload(Bucket="ver", Key="mp")["UploadId"]
e = s3.upload_part(Bucket="ver", Key="mp", UploadId=u, PartNumber=1, Body=b"part")["ETag"]
r = s3.complete_multipart_upload(Bucket="ver", Key="mp", UploadId=u, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
assert r["VersionId"] not in ("", "null") and s3.head_object(Bucket="ver", Key="mp")["VersionId"] == r["VersionId"], r

# Paging (max-keys 2 with key and version-id markers) and delimiters.
# "pg/b" is deleted before "pg/b/e" is written (a key cannot be a file
# and a directory at once), but their versions stay side by side.
for k in ["a/x", "a/y", "b", "b-c", "b.d"]:
    for i in range(2):
        s3.put_object(Bucket="ver", Key="pg/" + k, Body=b"%d" % i)
s3.delete_object(Bucket="ver", Key="pg/b-c")
s3.delete_object(Bucket="ver", Key="pg/b")
for i in range(2):
    s3.put_object(Bucket="ver", Key="pg/b/e", Body=b"%d" % i)
full = s3.list_object_versions(Bucket="ver", Prefix="pg/")
want = [(v["Key"], v["VersionId"]) for v in full["Versions"]] + [(m["Key"], m["VersionId"]) for m in full["DeleteMarkers"]]
assert len(want) == 14 and not full["IsTruncated"], full
assert sorted(set(k for k, _ in want)) == ["pg/a/x", "pg/a/y", "pg/b", "pg/b-c", "pg/b.d", "pg/b/e"], want
got = []
for page in s3.get_paginator("list_object_versions").paginate(Bucket="ver", Prefix="pg/", PaginationConfig={"PageSize": 2}):
    assert len(page.get("Versions", [])) + len(page.get("DeleteMarkers", [])) <= 2, page
    got += [(v["Key"], v["VersionId"]) for v in page.get("Versions", [])] + [(m["Key"], m["VersionId"]) for m in page.get("DeleteMarkers", [])]
assert sorted(got) == sorted(want), (got, want)
keys = [k for k, _ in got]
assert keys == sorted(keys, key=lambda k: k.encode()), keys
r = s3.list_object_versions(Bucket="ver", Prefix="pg/", Delimiter="/")
assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["pg/a/", "pg/b/"], r
assert sorted(set(v["Key"] for v in r["Versions"])) == ["pg/b", "pg/b-c", "pg/b.d"], r
r = s3.list_object_versions(Bucket="ver", Delimiter="/", MaxKeys=1)
assert r["IsTruncated"] and [v["Key"] for v in r["Versions"]] == ["copy"] and "CommonPrefixes" not in r, r
r = s3.list_object_versions(Bucket="ver", Delimiter="/", MaxKeys=1, KeyMarker=r["NextKeyMarker"], VersionIdMarker=r.get("NextVersionIdMarker", ""))
assert r["IsTruncated"] and [p["Prefix"] for p in r["CommonPrefixes"]] == ["data/"] and "Versions" not in r, r

# Suspended: new objects are the null version, which replaces the null
# version there was; older versions stay.
s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Suspended"})
assert s3.get_bucket_versioning(Bucket="ver")["Status"] == "Suspended"
s3.put_object(Bucket="ver", Key="data/k", Body=b"s1")
assert versions("data/") == ([("data/k", "null", True), ("data/k", ids[0], False)], []), versions("data/")
s3.put_object(Bucket="ver", Key="data/k", Body=b"s2")
assert versions("data/") == ([("data/k", "null", True), ("data/k", ids[0], False)], []), versions("data/")
assert body(Key="data/k") == b"s2" and body(Key="data/k", VersionId="null") == b"s2"
d = s3.delete_object(Bucket="ver", Key="data/k")
assert d["DeleteMarker"] and d["VersionId"] == "null", d
assert versions("data/") == ([("data/k", ids[0], False)], [("data/k", "null", True)]), versions("data/")

# Deleting a key that is a directory (a prefix of other keys) deletes no
# object, as without versioning.
assert s3.delete_object(Bucket="ver", Key="pg/a")["ResponseMetadata"]["HTTPStatusCode"] == 204
assert s3.get_object(Bucket="ver", Key="pg/a/x")["Body"].read() == b"1"

# Cleanup as tools do it: every version and marker, then the bucket.
assert err(s3.delete_bucket, Bucket="ver")[0] == "BucketNotEmpty"
objs = []
for page in s3.get_paginator("list_object_versions").paginate(Bucket="ver"):
    objs += [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
r = s3.delete_objects(Bucket="ver", Delete={"Objects": objs})
assert len(r["Deleted"]) == len(objs) and not r.get("Errors"), r
assert versions() == ([], []), versions()
s3.delete_bucket(Bucket="ver")
print("OK")
`

func TestVersioning(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	env := g.clientEnv(t)
	// Before the script deletes everything, check the file view: three
	// PUTs leave the latest as the file and two versions in the bucket's
	// working directory.
	pre := `
import os, boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
s3.create_bucket(Bucket="view")
s3.put_bucket_versioning(Bucket="view", VersioningConfiguration={"Status": "Enabled"})
for i in range(3):
    s3.put_object(Bucket="view", Key="d/k", Body=b"version %d" % i)
print("OK")
`
	g.runScript(t, py, "boto3", pre, env)
	c := g.client()
	ctx := context.Background()
	f, err := c.Open(ctx, "/view/d/k")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "version 2" {
		t.Errorf("/view/d/k holds %q, want the latest version", b)
	}
	ents, err := c.ReadDirAll(ctx, "/view/.sluice-s3/versions/kd/kk")
	if err != nil || len(ents) != 2 {
		t.Errorf("versions of d/k: %v, %v; want 2 files", ents, err)
	}
	g.runScript(t, py, "versioning", versioningScript, env)
	g.alive()
}
