package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// cpuTime is the CPU time the process has used (the fsync's wait is not
// the writer's work; on a shared machine wall time hides the difference).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGroupCommit_SQLiteAccepts is the SQLite writer's work for
// batches of 32 accepts (decide a new key, insert the send, store the key's
// record), with the rows deferred to multi-row inserts and without. Each
// send has three recipients, as the recipient index (send_addresses) costs
// per address. ns/op and cpu-ns/op are per accept.
func BenchmarkGroupCommit_SQLiteAccepts(b *testing.B) {
	for _, deferRows := range []bool{true, false} {
		b.Run(fmt.Sprintf("deferred=%v", deferRows), func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.gc.deferRows = deferRows
			now := time.Now()
			resp := idempotency.Response{Status: 200, ContentType: "application/json", Body: []byte(`{"id":"snd_x","object":"send","status":"queued"}`)}
			const batch = 32
			fns := make([]func(core.Tx) error, batch)
			n := 0
			b.ResetTimer()
			cpu0 := cpuTime()
			// Exactly b.N accepts, the last batch short: rounding the work
			// up to whole batches and dividing by b.N inflated ns/op (1.6×
			// at -benchtime 20x, which runs 32 for 20).
			for i := 0; i < b.N; i += batch {
				fns := fns[:min(batch, b.N-i)]
				for j := range fns {
					n++
					sc := sendKey(fmt.Sprint("key-", n))
					send := testSend(fmt.Sprint("snd_", n))
					send.To = []string{fmt.Sprintf("user%d@example.com", n), `"Ada" <Ada@Example.com>`}
					send.Cc = []string{"ops@example.com"}
					fns[j] = func(tx core.Tx) error {
						d, err := tx.DecideIdempotency(ctx, sc, "fp", now)
						if err != nil {
							return err
						}
						if err := tx.InsertSend(ctx, send); err != nil {
							return err
						}
						return tx.PutIdempotency(ctx, sc, "fp", d.Token, resp, now, now.Add(time.Hour))
					}
				}
				for _, err := range runAsBatch(s, fns...) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.StopTimer()
			var got int
			if err := s.QueryRow(ctx, `SELECT count(*) FROM sends`).Scan(&got); err != nil || got != b.N {
				b.Fatalf("%d sends written (%v), want b.N = %d", got, err, b.N)
			}
		})
	}
}
