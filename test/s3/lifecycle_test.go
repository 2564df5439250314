package s3

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/proctest"
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
    {"ID": "cold", "Filter": {"Prefix": ""}, "Status": "Enabled", "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}]}]}) == "InvalidStorageClass"  # no tier backend
assert code(s3.get_bucket_lifecycle_configuration, Bucket="lcb") == "NoSuchLifecycleConfiguration"
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

// transitionScript moves objects to the object tier with lifecycle
// transitions: the tier backend is another gateway (BACKEND_ENDPOINT),
// registered with `sluice tier add` (SLUICE_BIN, SLUICE_SERVER) while the
// script runs; the gateway under test was started with
// --s3-transition-tier cold.
const transitionScript = `
import os, time, hashlib, subprocess, boto3, botocore
from botocore.config import Config
cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4")
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], config=cfg)
tier = boto3.client("s3", endpoint_url=os.environ["BACKEND_ENDPOINT"], config=cfg)

def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"], e.response["Error"]["Message"]
    raise AssertionError("no error from %s %s" % (fn.__name__, kw))

def sluice(*args):
    r = subprocess.run([os.environ["SLUICE_BIN"]] + list(args), capture_output=True, text=True)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout

def hsm_state(path):
    return sluice("hsm", "state", path).split("\t")[0]

def wait(what, cond, timeout=120):
    end = time.time() + timeout
    while not cond():
        if time.time() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.5)

def sha(b):
    return hashlib.sha256(b).hexdigest()

def head_class(bucket, key, **kw):
    return s3.head_object(Bucket=bucket, Key=key, **kw).get("StorageClass", "STANDARD")

tier.create_bucket(Bucket="coldb")
tier.create_bucket(Bucket="otherb")

# Unversioned: objects under cold/ go to GLACIER a lifecycle day after
# they were made; hot/ stays.
s3.create_bucket(Bucket="lct")
data = {"cold/a": os.urandom(3 << 20 | 12345), "cold/small": os.urandom(100), "hot/b": os.urandom(1 << 20)}
for k, d in data.items():
    s3.put_object(Bucket="lct", Key=k, Body=d)
rules = [{"ID": "to-glacier", "Filter": {"Prefix": "cold/"}, "Status": "Enabled", "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]}]

# No backend named cold yet (another one is registered: the gateway uses
# the one its --s3-transition-tier names): refused, nothing stored.
sluice("tier", "add", "other", "--endpoint", os.environ["BACKEND_ENDPOINT"], "--bucket", "otherb", "--region", "us-east-1")
c, msg = code(s3.put_bucket_lifecycle_configuration, Bucket="lct", LifecycleConfiguration={"Rules": rules})
assert c == "InvalidStorageClass" and "transition tier" in msg and "cold" in msg, (c, msg)
assert code(s3.get_bucket_lifecycle_configuration, Bucket="lct")[0] == "NoSuchLifecycleConfiguration"
# Checked as S3 checks them.
for bad, want in [
    ({"Days": 1, "Date": "2024-01-01T00:00:00Z", "StorageClass": "GLACIER"}, "MalformedXML"),
    ({"Days": 1, "StorageClass": "STANDARD"}, "InvalidStorageClass"),
    ({"Days": 10, "StorageClass": "STANDARD_IA"}, "InvalidArgument"),
]:
    r = [{"ID": "bad", "Filter": {}, "Status": "Enabled", "Transitions": [bad]}]
    assert code(s3.put_bucket_lifecycle_configuration, Bucket="lct", LifecycleConfiguration={"Rules": r})[0] == want, bad
r = [{"ID": "twice", "Filter": {}, "Status": "Enabled", "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}, {"Days": 2, "StorageClass": "GLACIER"}]}]
assert code(s3.put_bucket_lifecycle_configuration, Bucket="lct", LifecycleConfiguration={"Rules": r})[0] == "InvalidArgument"

sluice("tier", "add", "cold", "--endpoint", os.environ["BACKEND_ENDPOINT"], "--bucket", "coldb", "--region", "us-east-1")
s3.put_bucket_lifecycle_configuration(Bucket="lct", LifecycleConfiguration={"Rules": rules})
got = s3.get_bucket_lifecycle_configuration(Bucket="lct")["Rules"]
assert got[0]["Transitions"] == [{"Days": 1, "StorageClass": "GLACIER"}] and got[0]["Filter"] == {"Prefix": "cold/"}, got

wait("cold/a to be transitioned", lambda: head_class("lct", "cold/a") == "GLACIER")
wait("cold/small to be transitioned", lambda: head_class("lct", "cold/small") == "GLACIER")
# Released (checked before any GET, which restores what it reads); a
# small file kept inline in the metadata can only be archived.
assert hsm_state("/lct/cold/a") == "released", sluice("hsm", "state", "/lct/cold/a")
assert hsm_state("/lct/cold/small") == "archived", sluice("hsm", "state", "/lct/cold/small")
assert hsm_state("/lct/hot/b") == "resident"
want = {"cold/a": "GLACIER", "cold/small": "GLACIER", "hot/b": "STANDARD"}
assert {o["Key"]: o["StorageClass"] for o in s3.list_objects_v2(Bucket="lct")["Contents"]} == want
assert {o["Key"]: o["StorageClass"] for o in s3.list_objects(Bucket="lct")["Contents"]} == want
assert {v["Key"]: v["StorageClass"] for v in s3.list_object_versions(Bucket="lct")["Versions"]} == want
assert s3.get_object_attributes(Bucket="lct", Key="cold/a", ObjectAttributes=["StorageClass"])["StorageClass"] == "GLACIER"
assert head_class("lct", "hot/b") == "STANDARD"
# The backend holds the data, with its SHA-256.
objs = {o["Key"]: o["Size"] for o in tier.list_objects_v2(Bucket="coldb")["Contents"]}
assert objs.get("lct/cold/a") == len(data["cold/a"]), objs
assert "lct/hot/b" not in objs, objs
assert tier.head_object(Bucket="coldb", Key="lct/cold/a")["Metadata"]["sluice-sha256"] == sha(data["cold/a"])
assert sha(tier.get_object(Bucket="coldb", Key="lct/cold/a")["Body"].read()) == sha(data["cold/a"])
# Read back through the gateway: the same bytes.
for k, d in data.items():
    r = s3.get_object(Bucket="lct", Key=k)
    assert sha(r["Body"].read()) == sha(d), k
    assert r.get("StorageClass", "STANDARD") == want[k], (k, r.get("StorageClass"))
assert code(s3.restore_object, Bucket="lct", Key="cold/a", RestoreRequest={"Days": 1})[0] == "NotImplemented"
# A new object under the key is STANDARD until it is transitioned again.
s3.put_object(Bucket="lct", Key="cold/a", Body=b"new" * 10000)
assert head_class("lct", "cold/a") == "STANDARD"

# Versioned: NoncurrentVersionTransition moves the noncurrent versions but
# the newest one; the current one stays.
s3.create_bucket(Bucket="lcn")
s3.put_bucket_versioning(Bucket="lcn", VersioningConfiguration={"Status": "Enabled"})
vdata = [os.urandom((1 << 20) + i) for i in range(3)]
ids = [s3.put_object(Bucket="lcn", Key="k", Body=d)["VersionId"] for d in vdata]
s3.put_bucket_lifecycle_configuration(Bucket="lcn", LifecycleConfiguration={"Rules": [
    {"ID": "nc", "Filter": {}, "Status": "Enabled", "NoncurrentVersionTransitions": [{"NoncurrentDays": 1, "NewerNoncurrentVersions": 1, "StorageClass": "DEEP_ARCHIVE"}]}]})
got = s3.get_bucket_lifecycle_configuration(Bucket="lcn")["Rules"][0]
assert got["NoncurrentVersionTransitions"] == [{"NoncurrentDays": 1, "NewerNoncurrentVersions": 1, "StorageClass": "DEEP_ARCHIVE"}], got

def classes():
    return {v["VersionId"]: v["StorageClass"] for v in s3.list_object_versions(Bucket="lcn")["Versions"]}
wait("the oldest version to be transitioned", lambda: classes().get(ids[0]) == "DEEP_ARCHIVE")
time.sleep(3)  # more sweeps: the others stay
assert classes() == {ids[0]: "DEEP_ARCHIVE", ids[1]: "STANDARD", ids[2]: "STANDARD"}, classes()
vdir = "/lcn/.sluice-s3/versions/kk/v"
assert hsm_state(vdir + ids[0]) == "released", sluice("hsm", "state", vdir + ids[0])
assert hsm_state(vdir + ids[1]) == "resident"
assert hsm_state("/lcn/k") == "resident"
assert head_class("lcn", "k", VersionId=ids[0]) == "DEEP_ARCHIVE"
assert head_class("lcn", "k") == "STANDARD"
objs = {o["Key"] for o in tier.list_objects_v2(Bucket="coldb")["Contents"]}
assert "lcn/.sluice-s3/versions/kk/v" + ids[0] in objs, objs
for vid, d in zip(ids, vdata):
    assert sha(s3.get_object(Bucket="lcn", Key="k", VersionId=vid)["Body"].read()) == sha(d), vid
print("OK")
`

// TestLifecycleTransition moves objects to the object tier with lifecycle
// transitions (issue 19): the tier backend is a second `sluice serve --s3`.
func TestLifecycleTransition(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t, "--s3-lifecycle-every", "1s", "--s3-lifecycle-day", "2s", "--s3-transition-tier", "cold")
	backend := startGateway(t)
	env := append(g.clientEnv(t), "BACKEND_ENDPOINT="+backend.endpoint, "SLUICE_BIN="+binary, "SLUICE_SERVER="+g.addr)
	g.runScript(t, py, "lifecycle transition", transitionScript, env)
	if !strings.Contains(g.logs(), "lifecycle rules transitioned objects") {
		t.Errorf("the transitions were not logged:\n%s", lastLines(g.logs(), 30))
	}
	g.alive()
	backend.alive()
}

// TestLifecycleTransitionNoTier: a configuration with a due transition
// (stored while a backend existed; here written straight into the
// bucket's xattr) on a gateway without a tier backend: the sweep logs
// that it skips the transition and the object stays as it was.
func TestLifecycleTransitionNoTier(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "--s3-lifecycle-every", "1s", "--s3-lifecycle-day", "2s")
	c := g.client()
	ctx := context.Background()
	data := bytes.Repeat([]byte("lifecycle "), 100000)
	if err := c.MkdirAll(ctx, "/notier", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := proctest.WriteFile(ctx, c, "/notier/a", data); err != nil {
		t.Fatal(err)
	}
	cfg := `{"rules":[{"filter":{},"status":"Enabled","transitions":[{"date":"2000-01-01T00:00:00Z","class":"GLACIER"}]}]}`
	if err := c.SetXattr(ctx, "/notier", "user.s3.lifecycle", []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(g.logs(), "lifecycle transitions skipped") {
		if time.Now().After(deadline) {
			t.Fatalf("no sweep skipped the transition in 2 minutes:\n%s", lastLines(g.logs(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if info, err := c.HsmState(ctx, "/notier/a"); err != nil || info.State != "resident" {
		t.Errorf("HSM state %+v, %v; want resident", info, err)
	}
	f, err := c.Open(ctx, "/notier/a")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	f.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("the object reads %d bytes (%v), want its %d bytes", len(got), err, len(data))
	}
	if strings.Contains(g.logs(), "lifecycle rules transitioned objects") {
		t.Errorf("a transition was counted without a tier:\n%s", lastLines(g.logs(), 30))
	}
	g.alive()
}
