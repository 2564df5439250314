package s3

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Second key pair of the gateways started with startGatewayKeys.
const (
	testAK2 = "SLUICETESTKEY0000002"
	testSK2 = "sluice-second-secret-key-0123456789abcdef"
)

// startGatewayKeys is startGateway with the test key pair and a second
// one, from a credentials file.
func startGatewayKeys(t testing.TB) *gateway {
	t.Helper()
	g := &gateway{t: t, dataDir: t.TempDir()}
	creds := filepath.Join(t.TempDir(), "s3-credentials")
	if err := os.WriteFile(creds, []byte(testAK+" "+testSK+"\n"+testAK2+" "+testSK2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, endpoint := startProc(t, nil, gatewayLine, "serve", "--data-dir", g.dataDir, "--listen", "127.0.0.1:0", "--s3", "127.0.0.1:0", "--s3-credentials", creds)
	g.procs = append(g.procs, p)
	g.endpoint = endpoint
	m := readyLine.FindStringSubmatch(p.Logs())
	if m == nil {
		t.Fatalf("no serving line in %s", p.Logs())
	}
	g.addr = m[1]
	return g
}

// ownerScript checks bucket and object owners with two access keys
// (issue 19: re-creating another key's bucket answered
// BucketAlreadyOwnedByYou).
const ownerScript = `
import os, boto3, botocore
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4")
a = boto3.client("s3", endpoint_url=ep, config=cfg)
me = os.environ["AWS_ACCESS_KEY_ID"]
other = os.environ["SECOND_KEY"]
b = boto3.client("s3", endpoint_url=ep, config=cfg, aws_access_key_id=other, aws_secret_access_key=os.environ["SECOND_SECRET"])

def code(fn, *x, **kw):
    try:
        fn(*x, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    raise AssertionError("no error from %s %s" % (fn.__name__, kw))

a.create_bucket(Bucket="mine")
assert code(b.create_bucket, Bucket="mine") == ("BucketAlreadyExists", 409)
assert code(a.create_bucket, Bucket="mine") == ("BucketAlreadyOwnedByYou", 409)
b.create_bucket(Bucket="theirs")
assert code(a.create_bucket, Bucket="theirs") == ("BucketAlreadyExists", 409)

# GetBucketAcl names the owner, whoever asks.
for c in (a, b):
    assert c.get_bucket_acl(Bucket="mine")["Owner"]["ID"] == me
    assert c.get_bucket_acl(Bucket="theirs")["Owner"]["ID"] == other
# Every key may use every bucket; objects record who wrote them.
b.put_object(Bucket="mine", Key="by-b", Body=b"b")
a.put_object(Bucket="mine", Key="by-a", Body=b"a")
assert a.get_object_acl(Bucket="mine", Key="by-b")["Owner"]["ID"] == other
owners = {o["Key"]: o["Owner"]["ID"] for o in a.list_objects(Bucket="mine")["Contents"]}
assert owners == {"by-a": me, "by-b": other}, owners
owners = {o["Key"]: o["Owner"]["ID"] for o in b.list_objects_v2(Bucket="mine", FetchOwner=True)["Contents"]}
assert owners == {"by-a": me, "by-b": other}, owners
# ListBuckets lists every bucket; its Owner is the requester, as in S3.
r = b.list_buckets()
assert r["Owner"]["ID"] == other and sorted(x["Name"] for x in r["Buckets"]) == ["mine", "theirs"], r
print("OK")
`

func TestBucketOwners(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGatewayKeys(t)
	env := append(g.clientEnv(t), "SECOND_KEY="+testAK2, "SECOND_SECRET="+testSK2)
	g.runScript(t, py, "owner", ownerScript, env)
	// awscli with the second key: mb of the first key's bucket fails.
	aws := awsBin(t)
	env2 := append(g.clientEnv(t), "AWS_ACCESS_KEY_ID="+testAK2, "AWS_SECRET_ACCESS_KEY="+testSK2)
	res := runTool(t, env2, nil, aws, "--endpoint-url", g.endpoint, "s3", "mb", "s3://mine")
	if res.code == 0 || !strings.Contains(res.stderr, "BucketAlreadyExists") {
		t.Errorf("aws s3 mb of another key's bucket: exit %d: %s %s", res.code, res.stdout, res.stderr)
	}
	g.alive()
}
