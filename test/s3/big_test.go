package s3

import (
	"bytes"
	"crypto/sha256"
	le "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// patternReader yields size bytes: 1 MiB blocks of one random block,
// each stamped with its index, so that a lost, repeated or misplaced part
// changes the checksum. It is much faster than a random source.
type patternReader struct {
	block []byte
	off   int64
	size  int64
}

func newPatternReader(size int64) *patternReader {
	b := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < len(b); i += 8 {
		le.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return &patternReader{block: b, size: size}
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(b) && p.off < p.size {
		idx, in := p.off>>20, p.off&(1<<20-1)
		if in < 8 {
			var stamp [8]byte
			le.LittleEndian.PutUint64(stamp[:], uint64(idx))
			c := copy(b[n:], stamp[in:])
			c = int(min(int64(c), p.size-p.off))
			n += c
			p.off += int64(c)
			continue
		}
		c := copy(b[n:], p.block[in:])
		c = int(min(int64(c), p.size-p.off))
		n += c
		p.off += int64(c)
	}
	return n, nil
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

// TestBigUploadAWSCLI uploads a 5 GiB file with `aws s3 cp` (multipart)
// and reads it back with awscli, comparing SHA-256 digests as the bytes
// stream. SLUICE_S3_BIG_SIZE changes the size (e.g. 512M).
func TestBigUploadAWSCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("5 GiB upload: skipped with -short")
	}
	t.Parallel()
	aws := awsBin(t)
	size := int64(5 << 30)
	if s := os.Getenv("SLUICE_S3_BIG_SIZE"); s != "" {
		var err error
		if size, err = parseSize(s); err != nil {
			t.Fatalf("SLUICE_S3_BIG_SIZE: %v", err)
		}
	}
	g := startGateway(t)
	env := g.clientEnv(t)
	var home string
	for _, kv := range env {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = h
		}
	}
	os.WriteFile(filepath.Join(home, "aws-config"), []byte("[default]\ns3 =\n  multipart_threshold = 64MB\n  multipart_chunksize = 64MB\n  max_concurrent_requests = 8\n"), 0o600)

	start := time.Now()
	src := filepath.Join(t.TempDir(), "big.bin")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(io.MultiWriter(f, h), newPatternReader(size), make([]byte, 4<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := hex.EncodeToString(h.Sum(nil))
	t.Logf("generated %d bytes in %v", size, time.Since(start))

	mustRun(t, env, aws, "--endpoint-url", g.endpoint, "s3", "mb", "s3://big")
	start = time.Now()
	mustRun(t, env, aws, "--endpoint-url", g.endpoint, "s3", "cp", "--only-show-errors", src, "s3://big/big.bin")
	up := time.Since(start)
	t.Logf("aws s3 cp upload: %v (%.0f MB/s)", up, float64(size)/up.Seconds()/1e6)
	os.Remove(src) // keep the disk for the server's copy

	var head struct {
		ETag          string
		ContentLength int64
	}
	out := mustRun(t, env, aws, "--endpoint-url", g.endpoint, "s3api", "head-object", "--bucket", "big", "--key", "big.bin", "--output", "json")
	json.Unmarshal([]byte(out), &head)
	if head.ContentLength != size || !strings.Contains(head.ETag, "-") {
		t.Errorf("head-object: %+v", head)
	}

	start = time.Now()
	cmd := exec.Command(aws, "--endpoint-url", g.endpoint, "s3", "cp", "--only-show-errors", "s3://big/big.bin", "-")
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h = sha256.New()
	n, err := io.CopyBuffer(h, stdout, make([]byte, 4<<20))
	if werr := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("aws s3 cp download: %v %v: %s", err, werr, stderr.String())
	}
	down := time.Since(start)
	t.Logf("aws s3 cp download: %v (%.0f MB/s)", down, float64(size)/down.Seconds()/1e6)
	if n != size || hex.EncodeToString(h.Sum(nil)) != want {
		t.Fatalf("read back %d bytes with a different SHA-256", n)
	}
	g.alive()
}
