package fuse

import (
	"context"
	bin "encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
	"github.com/sluice-fs/sluice/internal/proctest"
)

// Model weights (issue 15): .safetensors files, an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the tensors' bytes. Inference servers mmap the file and read
// every tensor.

type tensorInfo struct {
	Dtype   string   `json:"dtype"`
	Shape   []int64  `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// safetensors returns a file of n tensors of size bytes each (random
// float32 data) and the CRC32C of each tensor, by name.
func safetensors(seed uint64, n int, size int64) ([]byte, map[string]uint32) {
	hdr := map[string]tensorInfo{}
	sums := map[string]uint32{}
	data := make([]byte, int64(n)*size)
	rng := rand.New(rand.NewPCG(seed, 15))
	for i := 0; i+8 <= len(data); i += 8 {
		bin.LittleEndian.PutUint64(data[i:], rng.Uint64())
	}
	for i := range n {
		name := fmt.Sprintf("model.layers.%d.weight", i)
		off := int64(i) * size
		hdr[name] = tensorInfo{Dtype: "F32", Shape: []int64{size / 4}, Offsets: [2]int64{off, off + size}}
		sums[name] = crc32.Checksum(data[off:off+size], crc32.MakeTable(crc32.Castagnoli))
	}
	j, _ := json.Marshal(hdr)
	for len(j)%8 != 0 {
		j = append(j, ' ')
	}
	out := bin.LittleEndian.AppendUint64(nil, uint64(len(j)))
	out = append(out, j...)
	return append(out, data...), sums
}

// loadSafetensors maps the file at p and reads every tensor, as
// safetensors' safe_open does: it returns each tensor's CRC32C.
func loadSafetensors(p string) (map[string]uint32, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, 0, err
	}
	defer syscall.Munmap(m)
	if len(m) < 8 {
		return nil, 0, fmt.Errorf("%s: too short", p)
	}
	n := int64(bin.LittleEndian.Uint64(m))
	var hdr map[string]tensorInfo
	if err := json.Unmarshal(m[8:8+n], &hdr); err != nil {
		return nil, 0, err
	}
	data := m[8+n:]
	sums := map[string]uint32{}
	var bytes int64
	for name, t := range hdr {
		sums[name] = crc32.Checksum(data[t.Offsets[0]:t.Offsets[1]], crc32.MakeTable(crc32.Castagnoli))
		bytes += t.Offsets[1] - t.Offsets[0]
	}
	return sums, bytes, nil
}

// readWhole reads the file at p front to back in 4 MiB reads, as
// torch.load reads a checkpoint's archive.
func readWhole(p string) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, make([]byte, 4<<20))
}

// targetReadBytes returns the bytes the server's targets have read, from
// its admin port's metrics.
func targetReadBytes(t testing.TB, admin string) int64 {
	t.Helper()
	var total float64
	for _, l := range strings.Split(proctest.Metrics(t, admin), "\n") {
		if strings.HasPrefix(l, "sluice_target_read_bytes_total{") {
			v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", l, err)
			}
			total += v
		}
	}
	return int64(total)
}

// modelServer starts sluice serve with its admin port and returns it with
// the admin address.
func modelServer(t *testing.T) (*server, string) {
	t.Helper()
	ln := freePort(t)
	dataDir := t.TempDir()
	p, addr := proctest.Start(t, binary, nil, readyLine, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--http", ln)
	return &server{t: t, dataDir: dataDir, addr: addr, proc: p, cmd: p.Cmd}, ln
}

// loadAll has readers each load every file at once (mmap, every tensor)
// and checks every tensor's CRC32C.
func loadAll(t testing.TB, dir string, names []string, sums map[string]map[string]uint32, readers int) (time.Duration, int64) {
	t.Helper()
	var wg sync.WaitGroup
	errc := make(chan error, readers*len(names))
	var mu sync.Mutex
	var total int64
	start := time.Now()
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				name := names[(i+r)%len(names)] // readers start on different files
				got, n, err := loadSafetensors(filepath.Join(dir, name))
				if err != nil {
					errc <- err
					return
				}
				for k, want := range sums[name] {
					if got[k] != want {
						errc <- fmt.Errorf("%s: tensor %s: CRC32C %08x, want %08x", name, k, got[k], want)
						return
					}
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return time.Since(start), total
}

// writeModel writes files of tensors through the client library (so that
// no page of them is cached by the mount's kernel) and returns their names
// and tensor checksums.
func writeModel(t testing.TB, s *server, dir string, files, tensors int, tensorSize int64, local string) ([]string, map[string]map[string]uint32) {
	t.Helper()
	c := s.client()
	ctx := context.Background()
	if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	sums := map[string]map[string]uint32{}
	for i := range files {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, files)
		b, ts := safetensors(uint64(i), tensors, tensorSize)
		if err := proctest.WriteFile(ctx, c, dir+"/"+name, b); err != nil {
			t.Fatal(err)
		}
		if local != "" {
			if err := os.WriteFile(filepath.Join(local, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		names = append(names, name)
		sums[name] = ts
	}
	sort.Strings(names)
	return names, sums
}

// TestModelLoadShared: 16 inference replicas on one node load the same
// model (safetensors, mmap and every tensor read) through one mount at
// once. Every tensor's bytes are right, and the targets serve the model
// about once, not once per replica: the replicas share the node's page
// cache (the mount keeps file pages across opens while a file is
// unchanged, docs/fuse.md).
func TestModelLoadShared(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	s, admin := modelServer(t)
	names, sums := writeModel(t, s, "/models/m1", 4, 8, 2<<20, "")
	m := startMount(t, s.addr)
	before := targetReadBytes(t, admin)
	_, loaded := loadAll(t, m.path("models", "m1"), names, sums, 16)
	served := targetReadBytes(t, admin) - before
	model := int64(4 * 8 * 2 << 20)
	if loaded != 16*model {
		t.Errorf("loaded %d tensor bytes, want %d", loaded, 16*model)
	}
	t.Logf("16 replicas loaded %d MiB of tensors; the targets served %d MiB (%.2fx the model)", loaded>>20, served>>20, float64(served)/float64(model))
	if served < model || served > 2*model {
		t.Errorf("the targets served %d bytes for a model of %d: want it about once (the replicas share pages)", served, model)
	}
}

// TestBenchModelLoad measures issue 15's model-weight loading: a model of
// .safetensors files (SLUICE_FUSE_BENCH_MODEL_MIB, default 2048) loaded
// by mmap (every tensor read) and read whole in 4 MiB reads (torch.load's
// pattern) through `sluice mount`, through `sluice serve --mount` (the
// mount in the targets' process) and through `sluice serve --mount
// --passthrough` on a directory of stripe count 1, and from a local ext4
// directory, each with a cold page cache (drop_caches; root), in the same
// run, as GB/s and ratios (SLUICE_FUSE_BENCH_ROUNDS rounds, default 2: the
// first passthrough round includes the check of every block at the first
// open; later opens of the unchanged files skip it); then 16 replicas loading it at once through one mount, with the
// bytes the targets served. SLUICE_FUSE_BENCH=1 runs it:
//
//	SLUICE_FUSE_BENCH=1 go test -run TestBenchModelLoad -v -timeout 1h ./test/fuse
func TestBenchModelLoad(t *testing.T) {
	requireFUSE(t)
	if os.Getenv("SLUICE_FUSE_BENCH") == "" {
		t.Skip("set SLUICE_FUSE_BENCH=1 to run the benchmarks")
	}
	mib := envInt(t, "SLUICE_FUSE_BENCH_MODEL_MIB", 2048)
	rounds := envInt(t, "SLUICE_FUSE_BENCH_ROUNDS", 2)
	const tensor = 16 << 20
	files := max(1, mib/512)
	perFile := max(1, mib/files/16)
	s, admin := modelServer(t)
	local := t.TempDir()
	names, sums := writeModel(t, s, "/models/bench", files, perFile, tensor, local)
	m := startMount(t, s.addr)
	mnt := m.path("models", "bench")
	// The same model in a directory of one stripe, through a separate
	// `sluice mount --passthrough` (the chunk files from the server's
	// direct-read socket).
	{
		c := s.client()
		must(t, c.MkdirAll(context.Background(), "/models/one", 0o755))
		must(t, c.SetLayout(context.Background(), "/models/one", client.Layout{StripeCount: 1}))
	}
	writeModel(t, s, "/models/one", files, perFile, tensor, "")
	pm := startMount(t, s.addr, "--passthrough")
	// The same model through `sluice serve --mount` (the mount in the
	// targets' process), with and without passthrough; the passthrough
	// server's directory has one stripe, so every file is one chunk the
	// kernel can read itself (docs/fuse.md, Passthrough).
	roots := []struct{ name, dir string }{{"local", local}, {"sluice mount", mnt}, {"sluice mount --passthrough", pm.path("models", "one")}}
	for _, pt := range []bool{false, true} {
		args, name := []string{}, "serve --mount"
		if pt {
			args, name = []string{"--passthrough"}, "serve --mount --passthrough"
		}
		_, mp, _, addr := startServeMount(t, args...)
		srv := &server{t: t, addr: addr}
		if pt {
			c := srv.client()
			must(t, c.MkdirAll(context.Background(), "/models/bench", 0o755))
			must(t, c.SetLayout(context.Background(), "/models/bench", client.Layout{StripeCount: 1}))
		}
		writeModel(t, srv, "/models/bench", files, perFile, tensor, "")
		roots = append(roots, struct{ name, dir string }{name, filepath.Join(mp, "models", "bench")})
	}
	size := int64(files * perFile * tensor)
	rate := func(d time.Duration) float64 { return float64(size) / d.Seconds() / 1e9 }
	for _, w := range []struct {
		name string
		load func(dir string) time.Duration
	}{
		{"safetensors mmap", func(dir string) time.Duration { d, _ := loadAll(t, dir, names, sums, 1); return d }},
		{"read whole (torch.load)", func(dir string) time.Duration {
			start := time.Now()
			for _, n := range names {
				if _, err := readWhole(filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
			return time.Since(start)
		}},
	} {
		for round := range rounds {
			var dl time.Duration
			for i, r := range roots {
				dropCaches()
				d := w.load(r.dir)
				if i == 0 {
					dl = d
					t.Logf("%s, round %d: %s %.2f GB/s (%d MiB, cold)", w.name, round+1, r.name, rate(d), size>>20)
					continue
				}
				note := ""
				if strings.HasSuffix(r.name, "--passthrough") && round == 0 && w.name == "safetensors mmap" {
					note = " (the first open checks every block: ADR 0005)"
				}
				t.Logf("%s, round %d: %s %.2f GB/s: %.2f of local%s", w.name, round+1, r.name, rate(d), dl.Seconds()/d.Seconds(), note)
			}
		}
	}
	dropCaches()
	before := targetReadBytes(t, admin)
	d, loaded := loadAll(t, mnt, names, sums, 16)
	served := targetReadBytes(t, admin) - before
	t.Logf("16 replicas at once through one mount: %.2f GB/s of tensors loaded in all, %.2f s; the targets served %.2fx the model", float64(loaded)/d.Seconds()/1e9, d.Seconds(), float64(served)/float64(size))
}
