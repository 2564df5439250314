package s3

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
)

// overwriteScript replaces objects with shorter ones, by PUT and by a
// multipart upload completed over an existing key, many times over, and
// checks every byte of each GET: the gateway paths that truncate or
// overwrite (issue 12). It prints OK at the end; any failed check raises.
const overwriteScript = `
import os, random
import boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
s3.create_bucket(Bucket="owr")
rng = random.Random(int(os.environ["SEED"]))
for i in range(20):
    key = "k%d" % (i % 3)
    long = bytes([65 + i % 26]) * rng.randint(100000, 3000000)
    s3.put_object(Bucket="owr", Key=key, Body=long)
    short = bytes([97 + i % 26]) * rng.randint(1, len(long) - 1)
    s3.put_object(Bucket="owr", Key=key, Body=short)
    got = s3.get_object(Bucket="owr", Key=key)["Body"].read()
    assert got == short, "PUT over a longer object, round %d: %d bytes, want %d; first bytes %r" % (i, len(got), len(short), got[:8])
    off = rng.randint(0, len(short) - 1)
    got = s3.get_object(Bucket="owr", Key=key, Range="bytes=%d-" % off)["Body"].read()
    assert got == short[off:], "ranged GET after PUT over a longer object, round %d" % i

# Multipart completed over a longer existing key.
for i in range(3):
    key = "mp%d" % i
    s3.put_object(Bucket="owr", Key=key, Body=b"Z" * (14 << 20))
    up = s3.create_multipart_upload(Bucket="owr", Key=key)["UploadId"]
    p1 = b"B" * (5 << 20)
    p2 = b"C" * rng.randint(1, 2 << 20)
    e1 = s3.upload_part(Bucket="owr", Key=key, UploadId=up, PartNumber=1, Body=p1)["ETag"]
    e2 = s3.upload_part(Bucket="owr", Key=key, UploadId=up, PartNumber=2, Body=p2)["ETag"]
    s3.complete_multipart_upload(Bucket="owr", Key=key, UploadId=up, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    got = s3.get_object(Bucket="owr", Key=key)["Body"].read()
    assert got == p1 + p2, "multipart over a longer key %d: %d bytes, want %d" % (i, len(got), len(p1) + len(p2))
    with open(os.path.join(os.environ["OUT"], key), "wb") as f:
        f.write(p1 + p2)
print("OK")
`

// TestOverwriteShorter runs overwriteScript with boto3, then reads the
// multipart results through the client library too.
func TestOverwriteShorter(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	out := t.TempDir()
	env := append(g.clientEnv(t), "SEED=12", "OUT="+out)
	g.runScript(t, py, "boto3", overwriteScript, env)
	c := g.client()
	ctx := context.Background()
	for _, key := range []string{"mp0", "mp1", "mp2"} {
		want := mustReadFile(t, out+"/"+key)
		f, err := c.Open(ctx, "/owr/"+key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s through the client library: %d bytes, want %d", key, len(got), len(want))
		}
	}
	g.alive()
}

func mustReadFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
