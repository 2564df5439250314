package s3

import (
	"strings"
	"testing"
)

// sseScript checks with boto3 that server-side encryption requests
// (SSE-S3, SSE-KMS, SSE-C) are refused with 501 NotImplemented and store
// nothing (issue 19: they were accepted and the data kept in plaintext).
const sseScript = `
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

key = b"k" * 32
s3.create_bucket(Bucket="sse")
s3.put_object(Bucket="sse", Key="plain", Body=b"plain")
ssec = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}
for kw in [{"ServerSideEncryption": "AES256"}, {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/k"}, ssec]:
    assert code(s3.put_object, Bucket="sse", Key="enc", Body=b"secret", **kw) == "NotImplemented", kw
    assert code(s3.create_multipart_upload, Bucket="sse", Key="enc", **kw) == "NotImplemented", kw
    assert code(s3.copy_object, Bucket="sse", Key="enc", CopySource="sse/plain", **kw) == "NotImplemented", kw
assert code(s3.copy_object, Bucket="sse", Key="enc", CopySource="sse/plain", CopySourceSSECustomerAlgorithm="AES256", CopySourceSSECustomerKey=key) == "NotImplemented"
assert code(s3.get_object, Bucket="sse", Key="plain", **ssec) == "NotImplemented"
assert code(s3.head_object, Bucket="sse", Key="plain", **ssec) == "501"
assert code(s3.head_object, Bucket="sse", Key="enc") == "404"
assert [o["Key"] for o in s3.list_objects_v2(Bucket="sse")["Contents"]] == ["plain"]
assert list(s3.list_multipart_uploads(Bucket="sse").get("Uploads", [])) == []
print("OK")
`

func TestSSERefused(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	g.runScript(t, py, "SSE", sseScript, g.clientEnv(t))
	aws := awsBin(t)
	res := runTool(t, g.clientEnv(t), []byte("data"), aws, "--endpoint-url", g.endpoint, "s3", "cp", "--sse", "AES256", "-", "s3://sse/cli")
	if res.code == 0 || !strings.Contains(res.stderr, "NotImplemented") {
		t.Errorf("aws s3 cp --sse: exit %d: %s %s", res.code, res.stdout, res.stderr)
	}
	g.alive()
}
