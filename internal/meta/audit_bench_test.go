package meta

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-fs/sluice/internal/kv"
	"github.com/sluice-fs/sluice/internal/wire"
)

// BenchmarkAudit measures the audit trail's cost on the metadata benchmark's
// operations, on the pebble engine: each iteration creates a file and
// unlinks it (the unlink is audited, the create is not), in one directory,
// on 1 and 16 goroutines. Variants:
//
//   - off: Options.NoAudit;
//   - pending: the change writes its pending record, nothing seals them
//     (the cost inside the audited transactions alone);
//   - sealer: the design chosen (ADR 0012): the change writes a pending
//     record, Run's background sealer chains them; the timed region ends
//     after every record is sealed, so the sealer's work is counted;
//   - inline: the rejected design, each change chains its entry itself
//     (reads and writes the chain head in its transaction).
//
// Compare ns/op of sealer and inline to off from the same run, and
// cpu-ns/op: the process's CPU time (user and system, every goroutine:
// the sealer's, pebble's compactions) per iteration, which other load on a
// shared machine disturbs far less than the elapsed time.
func BenchmarkAudit(b *testing.B) {
	for _, g := range benchGoroutines {
		for _, mode := range []string{"off", "pending", "sealer", "inline"} {
			b.Run(fmt.Sprintf("create+unlink/g=%d/audit=%s", g, mode), func(b *testing.B) {
				db, err := kv.OpenPebble(b.TempDir(), nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Close() })
				s, err := New(context.Background(), Options{DB: db, Targets: newFakeTargets(4), NoAudit: mode == "off"})
				if err != nil {
					b.Fatal(err)
				}
				s.auditInline = mode == "inline"
				s.noSealer = mode == "pending"
				ctx, stop := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Go(func() { s.Run(ctx) })
				defer func() { stop(); wg.Wait(); s.Close() }()
				d := mustMkdir(b, s, RootIno, "d")
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cpuTime(b)
				err = parallel(b.N, g, func(i int) error {
					name := fmt.Sprintf("f%d", i)
					if _, err := s.Create(ctx, &wire.CreateReq{Parent: d.Ino, Name: name, Mode: 0o644, Exclusive: true}); err != nil {
						return err
					}
					return s.Unlink(ctx, d.Ino, name)
				})
				if err != nil {
					b.Fatal(err)
				}
				if mode != "pending" {
					if _, err := s.SealAudit(ctx, s.nowNs()+1); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
				if mode != "off" {
					if r := verifyAuditB(b, s); r.BrokenSeq != 0 || r.Entries != uint64(b.N) {
						b.Fatalf("verify: %+v, want %d entries", r, b.N)
					}
				}
			})
		}
	}
}

func verifyAuditB(b *testing.B, s *Service) wire.AuditVerifyResp {
	b.Helper()
	r, err := s.AuditVerify(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSealAudit: the sealer alone, per entry: pending records are
// written first (not timed), then sealed.
func BenchmarkSealAudit(b *testing.B) {
	db, err := kv.OpenPebble(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	s := newTestService(b, db, newFakeTargets(4))
	ctx := context.Background()
	e := auditEntrySample()
	for i := 0; i < b.N; i += 100 {
		err := s.update(ctx, func(tx kv.Txn) error {
			for j := i; j < min(i+100, b.N); j++ {
				e.Time = int64(j + 1)
				if err := s.appendAudit(tx, &e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	n, err := s.SealAudit(ctx, s.nowNs())
	if err != nil || n != b.N {
		b.Fatalf("sealed %d of %d: %v", n, b.N, err)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
