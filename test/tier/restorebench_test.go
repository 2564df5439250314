package tier

import (
	"context"
	"fmt"
	"io"
	"sort"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/client"
)

// BenchmarkRestore measures restore on read (ADR 0016) beside baselines
// taken in the same run against the same backend (versitygw if installed,
// else a second `sluice serve --s3`):
//
//		go test -run '^$' -bench Restore -benchtime 1x ./test/tier
//
//	  - first-read latency: open and read the first 1 MiB of a released file
//	    with a new client (which starts its restore) vs the same for a
//	    resident file of the same size; the median of rounds, the file
//	    released again between rounds;
//	  - restore throughput: a whole restore (RestoreIno, in process) vs
//	    direct parallel ranged GETs of the same object (16 x 8 MiB in
//	    flight), alternating.
//
// SLUICE_RESTORE_BENCH_MIB sets the file's size (default 1024),
// SLUICE_RESTORE_BENCH_ROUNDS the rounds (default 3).
func BenchmarkRestore(b *testing.B) {
	ctx := context.Background()
	be := benchBackend(b)
	fs := startFS(b)
	addBackend(b, fs, be, "rb/")
	c := newClient(b, fs.addr, 0)
	mib := envInt("SLUICE_RESTORE_BENCH_MIB", 1024)
	rounds := envInt("SLUICE_RESTORE_BENCH_ROUNDS", 3)
	size := int64(mib) << 20
	chunk := randomData(1, 64<<20)
	for _, p := range []string{"/cold", "/hot"} {
		f, err := c.Create(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < mib; i += 64 {
			if _, err := f.Write(chunk[:min(64, mib-i)<<20]); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	fs.mustCLI("hsm", "archive", "/cold")
	ino := inoOf(b, c, "/cold")
	s3c := be.s3(b)
	release := func() {
		used := fs.chunkBytes()
		fs.mustCLI("hsm", "release", "/cold")
		waitFor(b, "release's chunk removal", func() bool { return fs.chunkBytes() <= used-size+size/100 })
	}
	// firstMiB opens p with a new client and reads its first MiB.
	firstMiB := func(cc *client.Client, p string) time.Duration {
		buf := make([]byte, 1<<20)
		t0 := time.Now()
		f, err := cc.Open(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(f, buf); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		f.Close()
		return d
	}
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	b.Run("FirstMiB", func(b *testing.B) {
		var cold, hot []time.Duration
		for range b.N * rounds {
			release()
			cc := restoringClient(b, fs.addr, 0)
			cold = append(cold, firstMiB(cc, "/cold"))
			// Let its restore finish before the next round releases.
			if _, err := cc.RestoreIno(ctx, ino); err != nil {
				b.Fatal(err)
			}
			hot = append(hot, firstMiB(restoringClient(b, fs.addr, 0), "/hot"))
		}
		mc, mh := median(cold), median(hot)
		b.ReportMetric(float64(mc.Microseconds())/1000, "released-ms")
		b.ReportMetric(float64(mh.Microseconds())/1000, "resident-ms")
		b.ReportMetric(mc.Seconds()/mh.Seconds(), "released/resident")
		b.Logf("first 1 MiB of a %d MiB file, new client: released %v, resident %v (medians of %d; released %v, resident %v): ratio %.1f",
			mib, mc.Round(time.Millisecond), mh.Round(time.Millisecond), len(cold), cold, hot, mc.Seconds()/mh.Seconds())
	})
	// A sequential reader of the released file with restore on read (the
	// default): its read, and the time until the restore it started has
	// committed, with the backend's CPU time; beside the same read by a
	// client with restore on read off (the bucket alone), alternating.
	b.Run("ReadWhileRestoring", func(b *testing.B) {
		b.SetBytes(size)
		var tr, tdone, toff time.Duration
		for range b.N * rounds {
			release()
			cc := newClientOpts(b, client.Options{Server: fs.addr, TierNoRestoreOnRead: true})
			t0 := time.Now()
			if n, err := readStream(ctx, cc, "/cold"); err != nil || n != size {
				b.Fatalf("read with restore on read off: %d, %v", n, err)
			}
			toff += time.Since(t0)
			cc = restoringClient(b, fs.addr, 0)
			cpu := startCPU(map[string]int{"backend": be.proc.Cmd.Process.Pid, "serve": fs.proc.Cmd.Process.Pid})
			t0 = time.Now()
			if n, err := readStream(ctx, cc, "/cold"); err != nil || n != size {
				b.Fatalf("read with restore on read: %d, %v", n, err)
			}
			tr += time.Since(t0)
			waitFor(b, "the read's restore", func() bool {
				info, err := cc.HsmStateIno(ctx, ino)
				return err == nil && info.State == "archived"
			})
			tdone += time.Since(t0)
			b.Logf("read while restoring: CPU per MiB: %s; client restores: %+v", cpu.per(mib), cc.RestoreStats())
		}
		n := float64(size) * float64(b.N*rounds) / (1 << 20)
		b.ReportMetric(n/tr.Seconds(), "read-MiB/s")
		b.ReportMetric(n/tdone.Seconds(), "restored-MiB/s")
		b.ReportMetric(n/toff.Seconds(), "bucket-only-MiB/s")
		b.Logf("a released %d MiB file read with restore on read: %.0f MiB/s (restored at %.0f MiB/s); read with restore on read off: %.0f MiB/s (ratio %.2f)",
			mib, n/tr.Seconds(), n/tdone.Seconds(), n/toff.Seconds(), toff.Seconds()/tr.Seconds())
	})
	b.Run("Throughput", func(b *testing.B) {
		b.SetBytes(size)
		var tr, td, tw time.Duration
		for round := range b.N * rounds {
			release()
			cc := restoringClient(b, fs.addr, 0)
			t0 := time.Now()
			info, err := cc.RestoreIno(ctx, ino)
			if err != nil || info.State != "archived" {
				b.Fatalf("restore: %+v, %v", info, err)
			}
			tr += time.Since(t0)
			t0 = time.Now()
			if err := rangedGet(ctx, s3c, "rb/cold", size, 8<<20, 16); err != nil {
				b.Fatal(err)
			}
			td += time.Since(t0)
			// The targets' side alone: a new file of the same size
			// written from memory and synced (the restore's ceiling).
			p := fmt.Sprintf("/w%d", round)
			f, err := c.Create(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			t0 = time.Now()
			for i := 0; i < mib; i += 64 {
				if _, err := f.Write(chunk[:min(64, mib-i)<<20]); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			tw += time.Since(t0)
			if err := c.Remove(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
		n := float64(size) * float64(b.N*rounds) / (1 << 20)
		ratio := td.Seconds() / tr.Seconds()
		b.ReportMetric(n/tr.Seconds(), "restore-MiB/s")
		b.ReportMetric(n/td.Seconds(), "direct-MiB/s")
		b.ReportMetric(ratio, "ratio")
		b.ReportMetric(n/tw.Seconds(), "write-MiB/s")
		b.Logf("restore of a released %d MiB file: %.0f MiB/s, direct ranged GETs %.0f MiB/s: ratio %.2f; writing the same bytes to a new file: %.0f MiB/s (restore/write %.2f)",
			mib, n/tr.Seconds(), n/td.Seconds(), ratio, n/tw.Seconds(), tw.Seconds()/tr.Seconds())
	})
}
