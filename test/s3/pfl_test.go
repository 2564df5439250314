package s3

import (
	"context"
	"testing"

	"github.com/sluice-fs/sluice/client"
)

// pflScript puts objects across a progressive layout's components with
// boto3 (a plain PUT and a multipart upload) and reads them back whole and
// by ranges that cross the components' boundaries.
const pflScript = `
import os, boto3
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))
one = os.urandom(7 << 20)
s3.put_object(Bucket="pfl", Key="one", Body=one)
parts = [os.urandom(5 << 20), os.urandom(5 << 20), os.urandom(123457)]
u = s3.create_multipart_upload(Bucket="pfl", Key="mp")["UploadId"]
done = []
for i, p in enumerate(parts):
    e = s3.upload_part(Bucket="pfl", Key="mp", UploadId=u, PartNumber=i + 1, Body=p)["ETag"]
    done.append({"PartNumber": i + 1, "ETag": e})
s3.complete_multipart_upload(Bucket="pfl", Key="mp", UploadId=u, MultipartUpload={"Parts": done})
mp = b"".join(parts)
for key, data in (("one", one), ("mp", mp)):
    assert s3.get_object(Bucket="pfl", Key=key)["Body"].read() == data, key
    for a, b in ((0, 1 << 20), ((1 << 20) - 100, (1 << 20) + 100), ((5 << 20) - 7, (6 << 20) + 3), (len(data) - 10, len(data) - 1)):
        got = s3.get_object(Bucket="pfl", Key=key, Range="bytes=%d-%d" % (a, b))["Body"].read()
        assert got == data[a:b + 1], (key, a, b)
print("OK")
`

// TestProgressiveLayoutS3: objects PUT through the gateway into a bucket
// whose directory has a progressive layout (ADR 0021) get it (every
// component, its chains), and read back byte for byte, also by ranges that
// cross its boundaries.
func TestProgressiveLayoutS3(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	c := g.client()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "/pfl", 0o755); err != nil {
		t.Fatal(err)
	}
	pfl := []client.LayoutComponent{{End: 1 << 20, StripeSize: 64 << 10, StripeCount: 1}, {End: 6 << 20, StripeSize: 256 << 10, StripeCount: 2}, {StripeSize: 1 << 20, StripeCount: 3}}
	if err := c.SetLayout(ctx, "/pfl", client.Layout{Components: pfl}); err != nil {
		t.Fatal(err)
	}
	g.runScript(t, py, "progressive layout", pflScript, g.clientEnv(t))
	for _, key := range []string{"/pfl/one", "/pfl/mp"} {
		l, err := c.GetLayout(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Components) != 3 || l.StripeCount != 6 || len(l.Chains) != 6 {
			t.Errorf("%s: layout %+v, want the directory's 3 components on 1 + 2 + 3 chains", key, l)
		}
	}
	g.alive()
}
