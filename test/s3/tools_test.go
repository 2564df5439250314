package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// awsBin is Debian's awscli v2, which .ci/run installs, by its path: an aws
// earlier on PATH may be awscli v1 (a pip or pyenv shim), whose options and
// output the tests do not expect.
func awsBin(t testing.TB) string {
	return proctest.NeedTool(t, "/usr/bin/aws")
}

func pythonBin(t testing.TB) string {
	p := "/usr/bin/python3"
	if _, err := os.Stat(p); err != nil {
		p = need(t, "python3")
	}
	if r := runTool(t, os.Environ(), nil, p, "-c", "import boto3"); r.code != 0 {
		proctest.SkipMissing(t, "python3-boto3 is not installed: %s", r.stderr)
	}
	return p
}

// makeTree writes files of pseudo-random content under dir and returns
// their relative paths.
func makeTree(t testing.TB, dir string, files map[string]int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for name, size := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sameTrees fails the test unless two local trees hold the same files.
func sameTrees(t testing.TB, a, b string) {
	t.Helper()
	read := func(root string) map[string][32]byte {
		out := map[string][32]byte{}
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, p)
			out[rel] = sha256.Sum256(data)
			return nil
		})
		return out
	}
	ma, mb := read(a), read(b)
	if len(ma) != len(mb) {
		t.Fatalf("trees differ: %d files vs %d", len(ma), len(mb))
	}
	for k, v := range ma {
		if mb[k] != v {
			t.Fatalf("trees differ at %s", k)
		}
	}
}

var treeFiles = map[string]int{
	"a.txt": 10, "empty": 0, "sub/b.bin": 100000, "sub/deeper/c.bin": 3 << 20, "big.bin": 20 << 20,
	"name with spaces.txt": 5, "ünïcødé+plus.txt": 7,
}

func TestAWSCLI(t *testing.T) {
	t.Parallel()
	aws := awsBin(t)
	g := startGateway(t)
	env := g.clientEnv(t)
	home := strings.TrimPrefix(env[slices.IndexFunc(env, func(s string) bool { return strings.HasPrefix(s, "HOME=") })], "HOME=")
	os.WriteFile(filepath.Join(home, "aws-config"), []byte("[default]\ns3 =\n  multipart_threshold = 8MB\n  multipart_chunksize = 8MB\n"), 0o600)
	cli := func(args ...string) string {
		t.Helper()
		return mustRun(t, env, aws, append([]string{"--endpoint-url", g.endpoint}, args...)...)
	}
	api := func(out any, args ...string) {
		t.Helper()
		if out != nil {
			// Reset: json.Unmarshal merges into maps and keeps absent fields.
			v := reflect.ValueOf(out).Elem()
			v.Set(reflect.Zero(v.Type()))
		}
		s := cli(append([]string{"s3api", "--output", "json"}, args...)...)
		if out != nil && s != "" {
			if err := json.Unmarshal([]byte(s), out); err != nil {
				t.Fatalf("s3api %v: %v: %s", args, err, s)
			}
		}
	}
	src := t.TempDir()
	makeTree(t, src, treeFiles)

	cli("s3", "mb", "s3://cli")
	cli("s3", "sync", src, "s3://cli/data/")
	out := cli("s3", "ls", "--recursive", "s3://cli/data/")
	if n := strings.Count(out, "\n"); n != len(treeFiles) {
		t.Errorf("aws s3 ls: %d lines, want %d:\n%s", n, len(treeFiles), out)
	}
	// A second sync has nothing to do.
	if out := cli("s3", "sync", src, "s3://cli/data/"); out != "" {
		t.Errorf("second sync copied again: %s", out)
	}
	dst := t.TempDir()
	cli("s3", "sync", "s3://cli/data/", dst)
	sameTrees(t, src, dst)
	dst2 := t.TempDir()
	cli("s3", "cp", "--recursive", "s3://cli/data/", dst2)
	sameTrees(t, src, dst2)

	// The same bytes through the client library.
	fc := g.client()
	want, _ := os.ReadFile(filepath.Join(src, "big.bin"))
	if got := readAll(t, fc, "/cli/data/big.bin"); !bytes.Equal(got, want) {
		t.Errorf("client library read %d bytes of big.bin, differs", len(got))
	}
	var head struct {
		ETag          string
		ContentLength int64
		Metadata      map[string]string
		ContentType   string
	}
	api(&head, "head-object", "--bucket", "cli", "--key", "data/big.bin")
	if head.ContentLength != 20<<20 || !strings.HasSuffix(head.ETag, `-3"`) {
		t.Errorf("multipart upload head: %+v", head)
	}

	// s3api, call by call.
	obj := filepath.Join(src, "a.txt")
	api(nil, "put-object", "--bucket", "cli", "--key", "api/one", "--body", obj, "--content-type", "text/one", "--metadata", "k1=v1,k2=v2")
	api(&head, "head-object", "--bucket", "cli", "--key", "api/one")
	if head.ContentType != "text/one" || head.Metadata["k1"] != "v1" || head.Metadata["k2"] != "v2" {
		t.Errorf("head-object: %+v", head)
	}
	part := filepath.Join(t.TempDir(), "part")
	api(nil, "get-object", "--bucket", "cli", "--key", "api/one", "--range", "bytes=2-5", part)
	if b, _ := os.ReadFile(part); !bytes.Equal(b, want0(t, obj)[2:6]) {
		t.Errorf("ranged get-object: %q", b)
	}
	api(nil, "copy-object", "--bucket", "cli", "--key", "api/two", "--copy-source", "cli/api/one", "--metadata-directive", "REPLACE", "--metadata", "k3=v3")
	api(&head, "head-object", "--bucket", "cli", "--key", "api/two")
	if head.Metadata["k3"] != "v3" || head.Metadata["k1"] != "" {
		t.Errorf("copy-object REPLACE: %+v", head)
	}
	for i := range 5 {
		api(nil, "put-object", "--bucket", "cli", "--key", fmt.Sprintf("api/many/%d", i), "--body", obj)
	}
	var l2 struct {
		Contents              []struct{ Key string }
		CommonPrefixes        []struct{ Prefix string }
		IsTruncated           bool
		NextContinuationToken string
	}
	api(&l2, "list-objects-v2", "--bucket", "cli", "--prefix", "api/", "--delimiter", "/", "--no-paginate")
	if len(l2.Contents) != 2 || len(l2.CommonPrefixes) != 1 || l2.CommonPrefixes[0].Prefix != "api/many/" {
		t.Errorf("list-objects-v2 with delimiter: %+v", l2)
	}
	api(&l2, "list-objects-v2", "--bucket", "cli", "--prefix", "api/many/", "--max-keys", "2", "--no-paginate")
	if len(l2.Contents) != 2 || !l2.IsTruncated {
		t.Errorf("list-objects-v2 page: %+v", l2)
	}
	api(&l2, "list-objects-v2", "--bucket", "cli", "--prefix", "api/many/", "--max-keys", "2", "--no-paginate", "--continuation-token", l2.NextContinuationToken, "--fetch-owner", "--start-after", "x")
	if len(l2.Contents) != 2 || l2.Contents[0].Key != "api/many/2" {
		t.Errorf("list-objects-v2 second page: %+v", l2)
	}
	var l1 struct{ Contents []struct{ Key string } }
	api(&l1, "list-objects", "--bucket", "cli", "--prefix", "api/many/", "--marker", "api/many/3")
	if len(l1.Contents) != 1 || l1.Contents[0].Key != "api/many/4" {
		t.Errorf("list-objects with marker: %+v", l1)
	}
	delDoc := filepath.Join(t.TempDir(), "del.json")
	os.WriteFile(delDoc, []byte(`{"Objects":[{"Key":"api/many/0"},{"Key":"api/many/1"}],"Quiet":false}`), 0o644)
	var del struct{ Deleted []struct{ Key string } }
	api(&del, "delete-objects", "--bucket", "cli", "--delete", "file://"+delDoc)
	if len(del.Deleted) != 2 {
		t.Errorf("delete-objects: %+v", del)
	}

	// Multipart, call by call.
	var mp struct{ UploadId string }
	api(&mp, "create-multipart-upload", "--bucket", "cli", "--key", "api/mp", "--content-type", "application/x-mp")
	p1 := filepath.Join(t.TempDir(), "p1")
	os.WriteFile(p1, bytes.Repeat([]byte("p"), 5<<20), 0o644)
	var up struct{ ETag string }
	api(&up, "upload-part", "--bucket", "cli", "--key", "api/mp", "--upload-id", mp.UploadId, "--part-number", "1", "--body", p1)
	var upc struct{ CopyPartResult struct{ ETag string } }
	api(&upc, "upload-part-copy", "--bucket", "cli", "--key", "api/mp", "--upload-id", mp.UploadId, "--part-number", "2", "--copy-source", "cli/data/sub/b.bin", "--copy-source-range", "bytes=0-999")
	var lp struct{ Parts []struct{ PartNumber int } }
	api(&lp, "list-parts", "--bucket", "cli", "--key", "api/mp", "--upload-id", mp.UploadId)
	if len(lp.Parts) != 2 {
		t.Errorf("list-parts: %+v", lp)
	}
	var lu struct {
		Uploads []struct{ Key, UploadId string }
	}
	api(&lu, "list-multipart-uploads", "--bucket", "cli")
	if len(lu.Uploads) != 1 || lu.Uploads[0].UploadId != mp.UploadId {
		t.Errorf("list-multipart-uploads: %+v", lu)
	}
	doc := filepath.Join(t.TempDir(), "mpu.json")
	os.WriteFile(doc, []byte(fmt.Sprintf(`{"Parts":[{"PartNumber":1,"ETag":%q},{"PartNumber":2,"ETag":%q}]}`, up.ETag, upc.CopyPartResult.ETag)), 0o644)
	api(nil, "complete-multipart-upload", "--bucket", "cli", "--key", "api/mp", "--upload-id", mp.UploadId, "--multipart-upload", "file://"+doc)
	got := readAll(t, fc, "/cli/api/mp")
	b1000, _ := os.ReadFile(filepath.Join(src, "sub/b.bin"))
	if !bytes.Equal(got, append(bytes.Repeat([]byte("p"), 5<<20), b1000[:1000]...)) {
		t.Errorf("assembled multipart object differs (%d bytes)", len(got))
	}
	api(&mp, "create-multipart-upload", "--bucket", "cli", "--key", "api/aborted")
	api(nil, "abort-multipart-upload", "--bucket", "cli", "--key", "api/aborted", "--upload-id", mp.UploadId)
	api(&lu, "list-multipart-uploads", "--bucket", "cli")
	if len(lu.Uploads) != 0 {
		t.Errorf("after abort: %+v", lu)
	}

	// Presigned GET.
	u := strings.TrimSpace(cli("s3", "presign", "s3://cli/api/one", "--expires-in", "300"))
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(b, want0(t, obj)) {
		t.Errorf("presigned GET: %d %q", resp.StatusCode, b)
	}

	// Errors reach the user with their S3 codes.
	r := runTool(t, env, nil, aws, "--endpoint-url", g.endpoint, "s3", "rb", "s3://cli")
	if r.code == 0 || !strings.Contains(r.stderr, "BucketNotEmpty") {
		t.Errorf("rb of a full bucket: %d %s", r.code, r.stderr)
	}
	r = runTool(t, env, nil, aws, "--endpoint-url", g.endpoint, "s3api", "head-object", "--bucket", "cli", "--key", "nope")
	if r.code == 0 || !strings.Contains(r.stderr, "404") {
		t.Errorf("head-object of a missing key: %d %s", r.code, r.stderr)
	}
	cli("s3", "rm", "--recursive", "s3://cli/")
	cli("s3", "rb", "s3://cli")
	var lb struct{ Buckets []struct{ Name string } }
	api(&lb, "list-buckets")
	if len(lb.Buckets) != 0 {
		t.Errorf("list-buckets after rb: %+v", lb)
	}
	g.alive()
}

func want0(t testing.TB, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readAll(t testing.TB, c *client.Client, p string) []byte {
	t.Helper()
	f, err := c.Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRclone(t *testing.T) {
	t.Parallel()
	rclone := need(t, "rclone")
	g := startGateway(t)
	env := append(g.clientEnv(t), "RCLONE_CONFIG_SL_TYPE=s3", "RCLONE_CONFIG_SL_PROVIDER=Other",
		"RCLONE_CONFIG_SL_ENDPOINT="+g.endpoint, "RCLONE_CONFIG_SL_ACCESS_KEY_ID="+testAK,
		"RCLONE_CONFIG_SL_SECRET_ACCESS_KEY="+testSK, "RCLONE_CONFIG_SL_REGION=us-east-1",
		"RCLONE_CONFIG_SL_FORCE_PATH_STYLE=true", "RCLONE_CONFIG=/dev/null")
	src := t.TempDir()
	makeTree(t, src, treeFiles)
	rc := func(args ...string) string { t.Helper(); return mustRun(t, env, rclone, args...) }
	rc("mkdir", "sl:rcl")
	rc("copy", src, "sl:rcl/copy")
	rc("check", src, "sl:rcl/copy") // compares sizes and MD5s (ETags)
	// sync deletes what the source no longer has.
	os.Remove(filepath.Join(src, "a.txt"))
	os.WriteFile(filepath.Join(src, "new.txt"), []byte("new"), 0o644)
	rc("sync", src, "sl:rcl/copy")
	rc("check", src, "sl:rcl/copy")
	out := rc("lsf", "-R", "sl:rcl/copy")
	if strings.Contains(out, "a.txt") || !strings.Contains(out, "new.txt") {
		t.Errorf("after sync: %s", out)
	}
	dst := t.TempDir()
	rc("copy", "sl:rcl/copy", dst)
	sameTrees(t, src, dst)
	// A file changed through the file system is seen as changed.
	fc := g.client()
	f, err := fc.Create(context.Background(), "/rcl/copy/new.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("changed through POSIX"))
	f.Close()
	if r := runTool(t, env, nil, rclone, "check", src, "sl:rcl/copy"); r.code == 0 {
		t.Errorf("rclone check passed after a POSIX change")
	}
	g.alive()
}

func TestS3cmd(t *testing.T) {
	t.Parallel()
	s3cmd := need(t, "s3cmd")
	g := startGateway(t)
	env := g.clientEnv(t)
	host := strings.TrimPrefix(g.endpoint, "http://")
	cfg := filepath.Join(t.TempDir(), "s3cfg")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\nhost_bucket = %s\nuse_https = False\nsignature_v2 = False\nbucket_location = us-east-1\n", testAK, testSK, host, host)), 0o600)
	sc := func(args ...string) string {
		t.Helper()
		return mustRun(t, env, s3cmd, append([]string{"-c", cfg}, args...)...)
	}
	src := t.TempDir()
	makeTree(t, src, treeFiles)
	sc("mb", "s3://s3c")
	sc("put", filepath.Join(src, "a.txt"), "s3://s3c/a.txt")
	sc("sync", src+"/", "s3://s3c/tree/")
	out := sc("ls", "-r", "s3://s3c")
	if n := strings.Count(out, "\n"); n != len(treeFiles)+1 {
		t.Errorf("s3cmd ls: %d lines:\n%s", n, out)
	}
	dst := t.TempDir()
	sc("get", "s3://s3c/a.txt", filepath.Join(dst, "a.txt"))
	if !bytes.Equal(want0(t, filepath.Join(dst, "a.txt")), want0(t, filepath.Join(src, "a.txt"))) {
		t.Error("s3cmd get differs")
	}
	dst2 := t.TempDir()
	sc("sync", "s3://s3c/tree/", dst2+"/")
	sameTrees(t, src, dst2)
	sc("info", "s3://s3c/a.txt")
	sc("del", "s3://s3c/a.txt")
	sc("del", "--recursive", "--force", "s3://s3c/tree/")
	sc("rb", "s3://s3c")
	g.alive()
}
