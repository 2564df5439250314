package s3

import (
	"encoding/json"
	"testing"
)

// taggingScript exercises object and bucket tagging with boto3 (issue 19:
// tagging writes answered 501).
const taggingScript = `
import os, boto3, botocore
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))

def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    raise AssertionError("no error from %s %s" % (fn.__name__, kw))

def tags(**kw):
    return {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket="tags", **kw)["TagSet"]}

def tagset(d):
    return {"TagSet": [{"Key": k, "Value": v} for k, v in d.items()]}

s3.create_bucket(Bucket="tags")
s3.put_object(Bucket="tags", Key="o", Body=b"x", Tagging="project=ai&stage=raw%20data")
assert tags(Key="o") == {"project": "ai", "stage": "raw data"}, tags(Key="o")
h = s3.head_object(Bucket="tags", Key="o")
assert h["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "2", h
assert s3.get_object(Bucket="tags", Key="o")["TagCount"] == 2
s3.put_object_tagging(Bucket="tags", Key="o", Tagging=tagset({"a": "1", "path": "s3://x/y z@+=:-_."}))
assert tags(Key="o") == {"a": "1", "path": "s3://x/y z@+=:-_."}, tags(Key="o")
# The tags do not change the object.
assert s3.head_object(Bucket="tags", Key="o")["ETag"] == h["ETag"]

# S3's limits: 10 tags per object, keys of 128 and values of 256
# characters, no aws: prefix, no duplicate keys.
assert code(s3.put_object_tagging, Bucket="tags", Key="o", Tagging=tagset({"k%d" % i: "v" for i in range(11)})) == "InvalidTag"
s3.put_object_tagging(Bucket="tags", Key="o", Tagging=tagset({"k%d" % i: "v" for i in range(10)}))
assert code(s3.put_object_tagging, Bucket="tags", Key="o", Tagging=tagset({"aws:x": "1"})) == "InvalidTag"
assert code(s3.put_object_tagging, Bucket="tags", Key="o", Tagging=tagset({"k" * 129: "1"})) == "InvalidTag"
assert code(s3.put_object_tagging, Bucket="tags", Key="o", Tagging=tagset({"k": "v" * 257})) == "InvalidTag"
assert code(s3.put_object_tagging, Bucket="tags", Key="o", Tagging={"TagSet": [{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}]}) == "InvalidTag"
assert code(s3.put_object, Bucket="tags", Key="bad", Body=b"x", Tagging="a=1&a=2") == "InvalidTag"
assert code(s3.put_object_tagging, Bucket="tags", Key="missing", Tagging=tagset({"a": "1"})) == "NoSuchKey"
assert len(tags(Key="o")) == 10
s3.delete_object_tagging(Bucket="tags", Key="o")
assert s3.get_object_tagging(Bucket="tags", Key="o")["TagSet"] == []
assert "x-amz-tagging-count" not in s3.head_object(Bucket="tags", Key="o")["ResponseMetadata"]["HTTPHeaders"]

# Multipart uploads and copies.
u = s3.create_multipart_upload(Bucket="tags", Key="mp", Tagging="mp=yes")["UploadId"]
e = s3.upload_part(Bucket="tags", Key="mp", UploadId=u, PartNumber=1, Body=b"part")["ETag"]
s3.complete_multipart_upload(Bucket="tags", Key="mp", UploadId=u, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
assert tags(Key="mp") == {"mp": "yes"}
s3.copy_object(Bucket="tags", Key="c1", CopySource="tags/mp")
assert tags(Key="c1") == {"mp": "yes"}
s3.copy_object(Bucket="tags", Key="c2", CopySource="tags/mp", TaggingDirective="REPLACE", Tagging="b=2")
assert tags(Key="c2") == {"b": "2"}

# Each version has its own tags.
s3.put_bucket_versioning(Bucket="tags", VersioningConfiguration={"Status": "Enabled"})
v1 = s3.put_object(Bucket="tags", Key="v", Body=b"1", Tagging="n=1")["VersionId"]
v2 = s3.put_object(Bucket="tags", Key="v", Body=b"2", Tagging="n=2")["VersionId"]
assert tags(Key="v") == {"n": "2"} and tags(Key="v", VersionId=v1) == {"n": "1"}
r = s3.put_object_tagging(Bucket="tags", Key="v", VersionId=v1, Tagging=tagset({"n": "one"}))
assert r["VersionId"] == v1, r
assert tags(Key="v", VersionId=v1) == {"n": "one"} and tags(Key="v") == {"n": "2"}
assert s3.get_object(Bucket="tags", Key="v", VersionId=v1)["Body"].read() == b"1"

# Bucket tagging.
assert code(s3.get_bucket_tagging, Bucket="tags") == "NoSuchTagSet"
s3.put_bucket_tagging(Bucket="tags", Tagging=tagset({"team": "ml", "cost center": "42"}))
assert sorted((t["Key"], t["Value"]) for t in s3.get_bucket_tagging(Bucket="tags")["TagSet"]) == [("cost center", "42"), ("team", "ml")]
assert code(s3.put_bucket_tagging, Bucket="tags", Tagging=tagset({"k%d" % i: "v" for i in range(51)})) == "InvalidTag"
s3.put_bucket_tagging(Bucket="tags", Tagging=tagset({"k%d" % i: "v" for i in range(50)}))
s3.delete_bucket_tagging(Bucket="tags")
assert code(s3.get_bucket_tagging, Bucket="tags") == "NoSuchTagSet"
assert code(s3.get_bucket_tagging, Bucket="nosuchbucket") == "NoSuchBucket"
print("OK")
`

func TestTagging(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	env := g.clientEnv(t)
	g.runScript(t, py, "tagging", taggingScript, env)
	// awscli: put and get the tags of an object.
	aws := awsBin(t)
	mustRun(t, env, aws, "--endpoint-url", g.endpoint, "s3api", "put-object-tagging", "--bucket", "tags", "--key", "o", "--tagging", "TagSet=[{Key=tool,Value=awscli}]")
	out := mustRun(t, env, aws, "--endpoint-url", g.endpoint, "s3api", "get-object-tagging", "--bucket", "tags", "--key", "o")
	var res struct{ TagSet []struct{ Key, Value string } }
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.TagSet) != 1 || res.TagSet[0].Key != "tool" || res.TagSet[0].Value != "awscli" {
		t.Errorf("aws s3api get-object-tagging: %s (%v)", out, err)
	}
	g.alive()
}
