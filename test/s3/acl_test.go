package s3

import (
	"testing"
)

// aclScript checks with boto3 that anonymous clients get what the canned
// ACLs grant and nothing else: an object's ACL decides reads of it, the
// bucket's ACL listing and writes (issue 19: a private object in a
// public-read bucket was readable, a public-read object in a private
// bucket was not, and x-amz-acl on PUT was ignored).
const aclScript = `
import os, boto3, botocore
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
me = os.environ["AWS_ACCESS_KEY_ID"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))
anon = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version=botocore.UNSIGNED))
ALL = "http://acs.amazonaws.com/groups/global/AllUsers"

def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    raise AssertionError("no error from %s %s" % (fn.__name__, kw))

def readable(b, k):
    try:
        return anon.get_object(Bucket=b, Key=k)["Body"].read()
    except botocore.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == "AccessDenied", e.response
        assert code(anon.head_object, Bucket=b, Key=k) == "403"
        return None

def grants(r):
    return set((g["Grantee"].get("URI") or g["Grantee"].get("ID"), g["Permission"]) for g in r["Grants"])

# A public-read bucket: listable, but its objects are private unless their ACL says otherwise.
s3.create_bucket(Bucket="pub", ACL="public-read")
s3.put_object(Bucket="pub", Key="private", Body=b"secret")
s3.put_object(Bucket="pub", Key="public", Body=b"hello", ACL="public-read")
assert readable("pub", "private") is None, "a private object of a public-read bucket is readable anonymously"
assert readable("pub", "public") == b"hello"
assert anon.head_object(Bucket="pub", Key="public")["ContentLength"] == 5
assert [o["Key"] for o in anon.list_objects_v2(Bucket="pub")["Contents"]] == ["private", "public"]
assert code(anon.get_object, Bucket="pub", Key="missing") == "NoSuchKey"  # the bucket may be listed

# A private bucket: a public-read object in it is readable, nothing else.
s3.create_bucket(Bucket="priv")
s3.put_object(Bucket="priv", Key="public", Body=b"shared", ACL="public-read")
s3.put_object(Bucket="priv", Key="private", Body=b"secret")
assert readable("priv", "public") == b"shared", "a public-read object of a private bucket is not readable"
assert readable("priv", "private") is None
assert code(anon.list_objects_v2, Bucket="priv") == "AccessDenied"
assert code(anon.get_object, Bucket="priv", Key="missing") == "AccessDenied"  # no listing: no existence either
assert code(anon.head_bucket, Bucket="priv") == "403"
assert code(anon.get_object_acl, Bucket="priv", Key="public") == "AccessDenied"
assert code(anon.put_object, Bucket="priv", Key="anon", Body=b"x") == "AccessDenied"
assert code(anon.delete_object, Bucket="priv", Key="public") == "AccessDenied"

# GetObjectAcl / PutObjectAcl.
r = s3.get_object_acl(Bucket="priv", Key="public")
assert r["Owner"]["ID"] == me and grants(r) == {(ALL, "READ"), (me, "FULL_CONTROL")}, r
r = s3.get_object_acl(Bucket="priv", Key="private")
assert grants(r) == {(me, "FULL_CONTROL")}, r
s3.put_object_acl(Bucket="priv", Key="public", ACL="private")
assert readable("priv", "public") is None
s3.put_object_acl(Bucket="priv", Key="private", ACL="public-read")
assert readable("priv", "private") == b"secret"
# The document GetObjectAcl returns is accepted back.
pol = s3.get_object_acl(Bucket="priv", Key="private")
s3.put_object_acl(Bucket="priv", Key="public", AccessControlPolicy={"Grants": pol["Grants"], "Owner": pol["Owner"]})
assert readable("priv", "public") == b"shared"
assert s3.get_object(Bucket="priv", Key="public")["ETag"] == s3.head_object(Bucket="priv", Key="public")["ETag"]

# Unsupported grants are refused, not ignored.
assert code(s3.put_object_acl, Bucket="priv", Key="public", GrantRead='uri="%s"' % ALL) == "NotImplemented"
assert code(s3.put_object, Bucket="priv", Key="x", Body=b"x", GrantRead='uri="%s"' % ALL) == "NotImplemented"
assert code(s3.put_object, Bucket="priv", Key="x", Body=b"x", ACL="aws-exec-read") == "NotImplemented"
assert code(s3.put_object_acl, Bucket="priv", Key="public", AccessControlPolicy={"Owner": {"ID": me}, "Grants": [
    {"Grantee": {"Type": "CanonicalUser", "ID": me}, "Permission": "FULL_CONTROL"},
    {"Grantee": {"Type": "AmazonCustomerByEmail", "EmailAddress": "a@example.com"}, "Permission": "READ"}]}) == "NotImplemented"
assert code(s3.put_object_acl, Bucket="priv", Key="public", AccessControlPolicy={"Owner": {"ID": me}, "Grants": [
    {"Grantee": {"Type": "CanonicalUser", "ID": me}, "Permission": "FULL_CONTROL"},
    {"Grantee": {"Type": "Group", "URI": ALL}, "Permission": "READ_ACP"}]}) == "NotImplemented"
assert code(s3.create_bucket, Bucket="logs", ACL="log-delivery-write") == "NotImplemented"
assert readable("priv", "public") == b"shared"  # the refused requests changed nothing

# CopyObject and CreateMultipartUpload take x-amz-acl; a copy does not inherit its source's ACL.
s3.copy_object(Bucket="priv", Key="copy-public", CopySource="priv/private", ACL="public-read")
s3.copy_object(Bucket="priv", Key="copy-default", CopySource="priv/private")
assert readable("priv", "copy-public") == b"secret" and readable("priv", "copy-default") is None
s3.copy_object(Bucket="priv", Key="copy-public", CopySource="priv/copy-public", MetadataDirective="REPLACE", Metadata={"a": "b"})
assert readable("priv", "copy-public") is None, "a copy onto itself keeps the ACL it did not ask for"
up = s3.create_multipart_upload(Bucket="priv", Key="mp", ACL="public-read")["UploadId"]
e = s3.upload_part(Bucket="priv", Key="mp", UploadId=up, PartNumber=1, Body=b"multi")["ETag"]
s3.complete_multipart_upload(Bucket="priv", Key="mp", UploadId=up, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
assert readable("priv", "mp") == b"multi"
assert code(anon.copy_object, Bucket="pub", Key="stolen", CopySource="priv/private") == "AccessDenied"

# Bucket ACLs: public-read-write lets anonymous clients write; private closes the bucket again.
assert grants(s3.get_bucket_acl(Bucket="pub")) == {(ALL, "READ"), (me, "FULL_CONTROL")}
assert code(anon.put_object, Bucket="pub", Key="anon", Body=b"x") == "AccessDenied"
s3.put_bucket_acl(Bucket="pub", ACL="public-read-write")
assert grants(s3.get_bucket_acl(Bucket="pub")) == {(ALL, "READ"), (ALL, "WRITE"), (me, "FULL_CONTROL")}
anon.put_object(Bucket="pub", Key="anon", Body=b"from anonymous", ACL="public-read")
assert readable("pub", "anon") == b"from anonymous"
assert s3.get_object_acl(Bucket="pub", Key="anon")["Owner"]["ID"] == "anonymous"
anon.delete_object(Bucket="pub", Key="anon")
assert code(anon.put_bucket_acl, Bucket="pub", ACL="private") == "AccessDenied"
s3.put_bucket_acl(Bucket="pub", ACL="private")
assert code(anon.list_objects_v2, Bucket="pub") == "AccessDenied"
assert readable("pub", "public") == b"hello"  # the object's own ACL still applies
assert code(anon.list_buckets) == "AccessDenied"
print("OK")
`

func TestACL(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	g.runScript(t, py, "ACL", aclScript, g.clientEnv(t))
	g.alive()
}
