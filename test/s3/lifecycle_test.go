package s3

import (
	"strings"
	"testing"
)

// lifecycleScript configures lifecycle rules with boto3 and waits for the
// gateway's sweep (every second, with 2-second lifecycle days) to apply
// them (issue 19: lifecycle configuration answered 501).
const lifecycleScript = `
import os, time, datetime, boto3, botocore
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))

def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    raise AssertionError("no error from %s %s" % (fn.__name__, kw))

def keys(bucket):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))

def versions(bucket, key):
    r = s3.list_object_versions(Bucket=bucket, Prefix=key)
    rows = [(v["LastModified"], v["VersionId"], v["IsLatest"], False) for v in r.get("Versions", []) if v["Key"] == key]
    rows += [(m["LastModified"], m["VersionId"], m["IsLatest"], True) for m in r.get("DeleteMarkers", []) if m["Key"] == key]
    return [(vid, latest, marker) for _, vid, latest, marker in sorted(rows, reverse=True)]

def wait(what, cond, timeout=60):
    end = time.time() + timeout
    while not cond():
        if time.time() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.5)

# Unversioned: a date in the past expires what the filter selects.
s3.create_bucket(Bucket="lcb")
assert code(s3.get_bucket_lifecycle_configuration, Bucket="lcb") == "NoSuchLifecycleConfiguration"
s3.put_object(Bucket="lcb", Key="logs/a", Body=b"a", Tagging="tmp=yes")
s3.put_object(Bucket="lcb", Key="logs/b", Body=b"b")
s3.put_object(Bucket="lcb", Key="data/c", Body=b"c", Tagging="tmp=yes")
assert code(s3.put_bucket_lifecycle_configuration, Bucket="lcb", LifecycleConfiguration={"Rules": [
    {"ID": "cold", "Filter": {"Prefix": ""}, "Status": "Enabled", "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}]}]}) == "NotImplemented"
assert code(s3.put_bucket_lifecycle_configuration, Bucket="lcb", LifecycleConfiguration={"Rules": [
    {"ID": "x", "Filter": {"Prefix": ""}, "Status": "Enabled", "Expiration": {"Days": 0}}]}) == "InvalidArgument"
rules = [
    {"ID": "tmp-logs", "Filter": {"And": {"Prefix": "logs/", "Tags": [{"Key": "tmp", "Value": "yes"}]}}, "Status": "Enabled",
     "Expiration": {"Date": datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)}},
    {"ID": "abort", "Filter": {"Prefix": "up/"}, "Status": "Enabled", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
    {"ID": "off", "Filter": {"Prefix": "data/"}, "Status": "Disabled", "Expiration": {"Days": 1}},
]
s3.put_bucket_lifecycle_configuration(Bucket="lcb", LifecycleConfiguration={"Rules": rules})
got = s3.get_bucket_lifecycle_configuration(Bucket="lcb")["Rules"]
assert [r["ID"] for r in got] == ["tmp-logs", "abort", "off"] and got[0]["Filter"]["And"]["Tags"] == [{"Key": "tmp", "Value": "yes"}], got
assert got[0]["Expiration"]["Date"].year == 2000 and got[1]["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 1, got
s3.create_multipart_upload(Bucket="lcb", Key="up/big")
s3.create_multipart_upload(Bucket="lcb", Key="keep/big")
wait("logs/a to expire", lambda: keys("lcb") == ["data/c", "logs/b"])
wait("the upload under up/ to be aborted", lambda: [u["Key"] for u in s3.list_multipart_uploads(Bucket="lcb").get("Uploads", [])] == ["keep/big"])

# Versioned: current objects expire into delete markers, noncurrent
# versions go a day after they stopped being current (but the newest
# one), and a delete marker left alone goes.
s3.create_bucket(Bucket="lcv")
s3.put_bucket_versioning(Bucket="lcv", VersioningConfiguration={"Status": "Enabled"})
ids = [s3.put_object(Bucket="lcv", Key="k", Body=b"%d" % i)["VersionId"] for i in range(3)]
g1 = s3.put_object(Bucket="lcv", Key="gone/x", Body=b"x")["VersionId"]
s3.delete_object(Bucket="lcv", Key="gone/x")
o1 = s3.put_object(Bucket="lcv", Key="old/y", Body=b"y")["VersionId"]
s3.put_bucket_lifecycle_configuration(Bucket="lcv", LifecycleConfiguration={"Rules": [
    {"ID": "nc", "Filter": {}, "Status": "Enabled", "NoncurrentVersionExpiration": {"NoncurrentDays": 1, "NewerNoncurrentVersions": 1},
     "Expiration": {"ExpiredObjectDeleteMarker": True}},
    {"ID": "gone", "Filter": {"Prefix": "gone/"}, "Status": "Enabled", "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
    {"ID": "old", "Filter": {"Prefix": "old/"}, "Status": "Enabled", "Expiration": {"Days": 1}},
]})
wait("k's oldest version to go", lambda: versions("lcv", "k") == [(ids[2], True, False), (ids[1], False, False)])
wait("gone/x to go entirely", lambda: versions("lcv", "gone/x") == [])
wait("old/y to expire into a delete marker", lambda: len(versions("lcv", "old/y")) == 2 and versions("lcv", "old/y")[0][1:] == (True, True))
assert versions("lcv", "old/y")[1] == (o1, False, False)
assert s3.get_object(Bucket="lcv", Key="old/y", VersionId=o1)["Body"].read() == b"y"
time.sleep(3)
assert versions("lcv", "k") == [(ids[2], True, False), (ids[1], False, False)], versions("lcv", "k")
s3.delete_bucket_lifecycle(Bucket="lcv")
assert code(s3.get_bucket_lifecycle_configuration, Bucket="lcv") == "NoSuchLifecycleConfiguration"
print("OK")
`

func TestLifecycle(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t, "--s3-lifecycle-every", "1s", "--s3-lifecycle-day", "2s")
	g.runScript(t, py, "lifecycle", lifecycleScript, g.clientEnv(t))
	if !strings.Contains(g.logs(), "lifecycle rules expired objects") {
		t.Errorf("the sweeps were not logged:\n%s", lastLines(g.logs(), 30))
	}
	g.alive()
}
