package s3

import (
	"testing"
)

// listingScript checks listing details with boto3 (issue 19):
// encoding-type=url encodes a space as %20 (and '+' as %2B), V1 returns
// Prefix as given, and an empty ContinuationToken is no token.
const listingScript = `
import os, boto3, botocore
from botocore.config import Config
ep = os.environ["S3_ENDPOINT"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))
s3.create_bucket(Bucket="lst")
keys = ["sp ace/x y", "sp ace/pl+us", "sp ace/per%cent", "sp ace/ünï"]
for k in keys:
    s3.put_object(Bucket="lst", Key=k, Body=k.encode())

# Asked for explicitly, the encoding comes back undecoded by botocore.
r = s3.list_objects_v2(Bucket="lst", Prefix="sp ace/", EncodingType="url")
assert [o["Key"] for o in r["Contents"]] == ["sp%20ace/per%25cent", "sp%20ace/pl%2Bus", "sp%20ace/x%20y", "sp%20ace/%C3%BCn%C3%AF"], r["Contents"]
assert r["Prefix"] == "sp%20ace/", r["Prefix"]
r = s3.list_objects_v2(Bucket="lst", Delimiter=" ", EncodingType="url")
assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["sp%20"] and r["Delimiter"] == "%20", r

# botocore asks for url encoding itself and decodes: keys round-trip.
assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="lst")["Contents"]) == sorted(keys)
r = s3.list_objects(Bucket="lst", Prefix="sp ace/", Delimiter="/")
assert sorted(o["Key"] for o in r["Contents"]) == sorted(keys), r["Contents"]
assert r["Prefix"] == "sp ace/", r["Prefix"]  # V1: Prefix as given
r = s3.list_objects_v2(Bucket="lst", Prefix="sp ace/", MaxKeys=2)
assert r["Prefix"] == "sp ace/" and r["IsTruncated"], r

# An empty continuation token is no token.
r = s3.list_objects_v2(Bucket="lst", ContinuationToken="")
assert len(r["Contents"]) == 4, r
assert "ContinuationToken" not in r or r["ContinuationToken"] == "", r
print("OK")
`

func TestListingEncoding(t *testing.T) {
	t.Parallel()
	py := pythonBin(t)
	g := startGateway(t)
	g.runScript(t, py, "listing", listingScript, g.clientEnv(t))
	g.alive()
}
