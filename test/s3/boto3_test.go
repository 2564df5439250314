package s3

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// boto3Script exercises the API through boto3, the AWS SDK for Python.
// It prints OK at the end; any failed check raises.
const boto3Script = `
import io, os, socket, sys, time, urllib.request, urllib.error, hashlib
import boto3, botocore
from botocore.config import Config
from boto3.s3.transfer import TransferConfig

ep = os.environ["S3_ENDPOINT"]
# signature_version: this botocore presigns with SigV2 by default, which the
# gateway refuses (SigV4 only); newer ones presign with SigV4.
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))

def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    raise AssertionError("no error from %s" % fn.__name__)

s3.create_bucket(Bucket="boto")
assert code(s3.create_bucket, Bucket="boto") == "BucketAlreadyOwnedByYou"
s3.put_object(Bucket="boto", Key="dir/obj", Body=b"0123456789", ContentType="text/plain", Metadata={"owner": "me"}, CacheControl="no-cache")
h = s3.head_object(Bucket="boto", Key="dir/obj")
assert h["ContentLength"] == 10 and h["Metadata"] == {"owner": "me"} and h["ContentType"] == "text/plain" and h["CacheControl"] == "no-cache", h
assert h["ETag"] == '"%s"' % hashlib.md5(b"0123456789").hexdigest()
assert s3.get_object(Bucket="boto", Key="dir/obj", Range="bytes=-3")["Body"].read() == b"789"
assert code(s3.get_object, Bucket="boto", Key="dir/obj", Range="bytes=10-") == "InvalidRange"
assert code(s3.get_object, Bucket="boto", Key="dir/obj", IfMatch='"nope"') == "PreconditionFailed"
assert code(s3.get_object, Bucket="boto", Key="dir/obj", IfNoneMatch=h["ETag"]) == "304"
assert code(s3.get_object, Bucket="boto", Key="dir/obj", IfModifiedSince=h["LastModified"]) == "304"
assert code(s3.get_object, Bucket="boto", Key="dir/obj", IfUnmodifiedSince=h["LastModified"].replace(year=2000)) == "PreconditionFailed"
assert code(s3.get_object, Bucket="boto", Key="missing") == "NoSuchKey"
assert code(s3.get_object, Bucket="nobucket", Key="missing") == "NoSuchBucket"
assert code(s3.put_object, Bucket="boto", Key="a/../b", Body=b"x") == "XSluiceInvalidObjectName"
assert code(s3.put_object, Bucket="boto", Key="dir/obj/under", Body=b"x") == "XSluiceKeyConflict"

# Unusual keys round-trip and list back exactly.
keys = ["sp ace", "pl+us", "per%cent", "ünï/cødé", "q?uery#frag", "amp&er=sand", "x" * 255, "/".join(["d"] * 300) + "/end"]
for k in keys:
    s3.put_object(Bucket="boto", Key="odd/" + k, Body=k.encode())
    assert s3.get_object(Bucket="boto", Key="odd/" + k)["Body"].read() == k.encode(), k
listed = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket="boto", Prefix="odd/", PaginationConfig={"PageSize": 3}) for o in p.get("Contents", [])]
assert listed == sorted("odd/" + k for k in keys), listed
listed = [o["Key"] for p in s3.get_paginator("list_objects").paginate(Bucket="boto", Prefix="odd/", PaginationConfig={"PageSize": 2}) for o in p.get("Contents", [])]
assert listed == sorted("odd/" + k for k in keys), listed

# Copy, with and without a metadata directive.
s3.copy_object(Bucket="boto", Key="copy1", CopySource={"Bucket": "boto", "Key": "dir/obj"})
assert s3.head_object(Bucket="boto", Key="copy1")["Metadata"] == {"owner": "me"}
s3.copy_object(Bucket="boto", Key="copy2", CopySource="boto/dir/obj", MetadataDirective="REPLACE", Metadata={"new": "1"}, ContentType="a/b")
h2 = s3.head_object(Bucket="boto", Key="copy2")
assert h2["Metadata"] == {"new": "1"} and h2["ContentType"] == "a/b", h2

# Multipart through the transfer manager, and back.
data = os.urandom(13 << 20)
s3.upload_fileobj(io.BytesIO(data), "boto", "mp/big", Config=TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
assert s3.head_object(Bucket="boto", Key="mp/big")["ETag"].endswith('-3"')
out = io.BytesIO()
s3.download_fileobj("boto", "mp/big", out, Config=TransferConfig(multipart_threshold=4 << 20, multipart_chunksize=4 << 20))
assert out.getvalue() == data
s3.copy({"Bucket": "boto", "Key": "mp/big"}, "boto", "mp/copy", Config=TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
assert s3.get_object(Bucket="boto", Key="mp/copy")["Body"].read() == data

# Presigned URLs: GET, PUT, and an expired one.
url = s3.generate_presigned_url("put_object", Params={"Bucket": "boto", "Key": "pre/put"}, ExpiresIn=60)
urllib.request.urlopen(urllib.request.Request(url, data=b"presigned body", method="PUT")).read()
url = s3.generate_presigned_url("get_object", Params={"Bucket": "boto", "Key": "pre/put"}, ExpiresIn=60)
assert urllib.request.urlopen(url).read() == b"presigned body"
url = s3.generate_presigned_url("get_object", Params={"Bucket": "boto", "Key": "pre/put"}, ExpiresIn=1)
time.sleep(2)
try:
    urllib.request.urlopen(url)
    raise AssertionError("expired URL worked")
except urllib.error.HTTPError as e:
    assert e.code == 403 and b"<Code>AccessDenied</Code>" in e.read()

# Batch delete.
r = s3.delete_objects(Bucket="boto", Delete={"Objects": [{"Key": "copy1"}, {"Key": "copy2"}, {"Key": "missing"}]})
assert len(r["Deleted"]) == 3, r
assert code(s3.delete_bucket, Bucket="boto") == "BucketNotEmpty"

# Wrong credentials.
bad = boto3.client("s3", endpoint_url=ep, aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key="wrong-secret", config=Config(retries={"max_attempts": 1}))
assert code(bad.list_buckets) == "SignatureDoesNotMatch"
bad = boto3.client("s3", endpoint_url=ep, aws_access_key_id="NOSUCHKEY", aws_secret_access_key="wrong-secret", config=Config(retries={"max_attempts": 1}))
assert code(bad.list_buckets) == "InvalidAccessKeyId"

# Virtual-hosted-style addressing: BUCKET.localhost resolves to loopback.
orig = socket.getaddrinfo
def resolve(host, *a, **kw):
    if host.endswith(".localhost"):
        host = "127.0.0.1"
    return orig(host, *a, **kw)
socket.getaddrinfo = resolve
vep = ep.replace("127.0.0.1", "localhost")
vh = boto3.client("s3", endpoint_url=vep, config=Config(s3={"addressing_style": "virtual"}))
vh.put_object(Bucket="boto", Key="virtual/key", Body=b"vhost")
assert s3.get_object(Bucket="boto", Key="virtual/key")["Body"].read() == b"vhost"
assert [o["Key"] for o in vh.list_objects_v2(Bucket="boto", Prefix="virtual/")["Contents"]] == ["virtual/key"]
print("OK")
`

func TestBoto3(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t, "--s3-domain", "localhost")
	g.runScript(t, py, "boto3", boto3Script, g.clientEnv(t))
	g.alive()
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// selfSigned writes a certificate and key for 127.0.0.1 and localhost.
func selfSigned(t testing.TB) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

// trailerScript uploads with flexible checksums over HTTPS, where the
// SDKs send aws-chunked bodies with an unsigned checksum trailer
// (STREAMING-UNSIGNED-PAYLOAD-TRAILER), and checks the data and the
// checksum read back.
const trailerScript = `
import os, io, urllib3, base64, zlib
urllib3.disable_warnings()
import boto3
from botocore.config import Config
from boto3.s3.transfer import TransferConfig
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], verify=False, config=Config(s3={"addressing_style": "path"}))
sent = []
def record(request, **kw):
    h = lambda k: (lambda v: v.decode() if isinstance(v, bytes) else v)(request.headers.get(k))
    sent.append((h("x-amz-content-sha256"), h("Content-Encoding"), h("x-amz-trailer")))
s3.meta.events.register("before-send.s3.PutObject", record)
s3.create_bucket(Bucket="tls")
# An expectation other than 100-continue is ignored over TLS too.
def expect(request, **kw):
    request.headers["Expect"] = "foo"
s3.meta.events.register("before-send.s3.ListObjectsV2", expect)
assert s3.list_objects_v2(Bucket="tls")["KeyCount"] == 0
data = os.urandom(300000)
algs = ["CRC32", "SHA256", "SHA1"]
try:
    import awscrt
    algs += ["CRC32C"]
except ImportError:
    pass
for alg in algs:
    r = s3.put_object(Bucket="tls", Key="obj-" + alg, Body=data, ChecksumAlgorithm=alg)
    back = s3.get_object(Bucket="tls", Key="obj-" + alg, ChecksumMode="ENABLED")
    assert back["Body"].read() == data, alg
    assert back.get("Checksum" + alg) == r.get("Checksum" + alg), (alg, back.get("Checksum" + alg), r.get("Checksum" + alg))
for mode, enc, trailer in sent:
    assert mode == "STREAMING-UNSIGNED-PAYLOAD-TRAILER" and "aws-chunked" in enc and trailer.startswith("x-amz-checksum-"), sent
crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
assert s3.head_object(Bucket="tls", Key="obj-CRC32", ChecksumMode="ENABLED")["ChecksumCRC32"] == crc
s3.upload_fileobj(io.BytesIO(os.urandom(11 << 20)), "tls", "mp", Config=TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20), ExtraArgs={"ChecksumAlgorithm": "CRC32"})
print("OK", len(sent), algs)
`

func TestBoto3TrailerChecksums(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	cert, key := selfSigned(t)
	g := startGateway(t, "--s3-tls-cert", cert, "--s3-tls-key", key)
	if !strings.HasPrefix(g.endpoint, "https://") {
		t.Fatalf("endpoint %s is not https", g.endpoint)
	}
	out := g.runScript(t, py, "trailer", trailerScript, g.clientEnv(t))
	t.Log(strings.TrimSpace(out))
	g.alive()
}

// TestManyObjects lists 10,000 objects with pagination: V2 and V1 pages
// of the raw API, boto3's paginator and awscli.
func TestManyObjects(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("10,000 objects: skipped with -short")
	}
	g := startGateway(t)
	c := newS3Client(g.endpoint)
	resp, body := c.do(t, "PUT", "/many", nil, nil, nil)
	mustStatus(t, resp, body, 200)
	const n = 10000
	name := func(i int) string { return fmt.Sprintf("d%d/obj-%05d", i%4, i) }
	// Most objects are written through the client library (faster); every
	// 50th through the gateway, 16 requests at a time.
	fc := g.client()
	ctx := context.Background()
	for d := range 4 {
		if err := fc.Mkdir(ctx, fmt.Sprintf("/many/d%d", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	work := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range work {
				if i%50 == 0 {
					resp, body := c.do(t, "PUT", "/many/"+name(i), nil, nil, []byte(name(i)))
					if resp.StatusCode != 200 {
						t.Errorf("PUT %s: %d %s", name(i), resp.StatusCode, body)
					}
					continue
				}
				f, err := fc.Create(ctx, "/many/"+name(i))
				if err == nil {
					_, err = f.Write([]byte(name(i)))
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
				if err != nil {
					t.Errorf("create %s: %v", name(i), err)
				}
			}
		})
	}
	start := time.Now()
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	t.Logf("10,000 objects written: %v", time.Since(start))
	count := func(version string) int {
		start := time.Now()
		q := url.Values{}
		if version == "2" {
			q.Set("list-type", "2")
		} else {
			q.Set("marker", "")
		}
		total, last := 0, ""
		for pages := 0; ; pages++ {
			r := c.list(t, "many", q)
			for _, k := range r.keys() {
				if k <= last {
					t.Fatalf("V%s listing out of order: %q after %q", version, k, last)
				}
				last = k
			}
			total += len(r.Contents)
			if !r.IsTruncated {
				break
			}
			if version == "2" {
				q.Set("continuation-token", r.NextContinuationToken)
			} else {
				q.Set("marker", r.NextMarker)
			}
		}
		t.Logf("V%s listing of %d objects: %v", version, total, time.Since(start))
		return total
	}
	if got := count("2"); got != n {
		t.Errorf("V2 listed %d objects", got)
	}
	if got := count("1"); got != n {
		t.Errorf("V1 listed %d objects", got)
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		py := pythonBin(t)
		script := `
import os, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"])
keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket="many") for o in p["Contents"]]
assert len(keys) == 10000 and keys == sorted(keys), len(keys)
pre = [p["Prefix"] for p in s3.list_objects_v2(Bucket="many", Delimiter="/")["CommonPrefixes"]]
assert pre == ["d0/", "d1/", "d2/", "d3/"], pre
print("OK")
`
		r := runTool(t, g.clientEnv(t), []byte(script), py, "-")
		if r.code != 0 || !strings.Contains(r.stdout, "OK") {
			t.Errorf("boto3 listing: %s %s", r.stdout, r.stderr)
		}
	}
	aws := awsBin(t)
	out := mustRun(t, g.clientEnv(t), aws, "--endpoint-url", g.endpoint, "s3", "ls", "--recursive", "s3://many/")
	if lines := strings.Count(out, "\n"); lines != n {
		t.Errorf("aws s3 ls listed %d objects", lines)
	}
	g.alive()
}
