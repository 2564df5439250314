package tier

import (
	"bufio"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOpenCarriesHsm: the open of a released file brings its HSM record
// (where its copy is) with the attributes, through the client library
// (OpResolveRead) and through a mount (OpOpenIno), so that its first read
// goes to the bucket without asking the metadata service for the record
// (OpHsmGet) first; the bytes read are the file's.
func TestOpenCarriesHsm(t *testing.T) {
	requireFUSE(t)
	ctx := context.Background()
	be := startSluiceBackend(t)
	admin := freeAddr(t)
	fs := startFS(t, "--http", admin)
	addBackend(t, fs, be, "o/")
	c := newClient(t, fs.addr, 0)
	want := map[string][]byte{}
	for i, name := range []string{"/s", "/big"} {
		want[name] = randomData(uint64(40+i), []int{150 << 10, 3<<20 + 5}[i])
		if err := writeSluice(ctx, c, name, want[name]); err != nil {
			t.Fatal(err)
		}
	}
	fs.mustCLI("hsm", "archive", "/s", "/big")
	fs.mustCLI("hsm", "release", "/s", "/big")

	hsmGets := func() int { return metaOps(t, admin, "hsm_get") }
	before := hsmGets()
	reader := newClient(t, fs.addr, 0) // a new client: nothing known of the files
	for name, data := range want {
		f, err := reader.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(f)
		f.Close()
		if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
			t.Fatalf("library read of released %s: %d bytes, %v; want %d", name, len(got), err, len(data))
		}
	}
	if n := hsmGets() - before; n != 0 {
		t.Errorf("library: %d HSM record requests for the first reads of 2 released files; the open's reply did not carry the record", n)
	}
	mp := mountFS(t, fs.addr, "--no-restore-on-read")
	before = hsmGets()
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(mp, name))
		if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
			t.Fatalf("mount read of released %s: %d bytes, %v; want %d", name, len(got), err, len(data))
		}
	}
	if n := hsmGets() - before; n != 0 {
		t.Errorf("mount: %d HSM record requests for the first reads of 2 released files; the open's reply did not carry the record", n)
	}
}

// metaOps returns how many requests of metadata op name (its metric
// label) the server with admin port admin has served.
func metaOps(t testing.TB, admin, name string) int {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	prefix := `sluice_op_duration_seconds_count{kind="meta",op="` + name + `"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", sc.Text(), err)
			}
			return int(n)
		}
	}
	t.Fatalf("/metrics of %s has no %s", admin, strings.TrimSpace(prefix))
	return 0
}
