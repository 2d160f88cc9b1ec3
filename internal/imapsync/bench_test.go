package imapsync_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/imapsync"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/testkit/dovecottest"
)

// The figures, left ready and not run by the suite (benchmarks
// run only with -bench): messages per second of a first sync from Dovecot
// against a plain go-imap FETCH loop over the same folder, and the heap
// the syncer holds meanwhile. For the closing note:
//
//	go test -run XXX -bench 'InitialSync|PlainFetch' -benchtime 1x ./internal/imapsync -msgs 20000
//
// (-msgs defaults to 2000). The receiver counts and drops: the figures are
// the sync's, not receiving's.

// benchMsgs is how many messages the benchmarks seed (-msgs).
var benchMsgs = flag.Int("msgs", 2000, "messages the IMAP benchmarks seed")

func seedMany(b *testing.B, d *dovecottest.Dovecot, n int) {
	b.Helper()
	now := time.Now()
	for i := range n {
		d.Deliver(b, "alice", "INBOX", plain(fmt.Sprintf("bench%d", i)), now.Add(-time.Duration(n-i)*time.Second))
	}
}

type countingReceiver struct{ n atomic.Int64 }

func (c *countingReceiver) Receive(_ context.Context, in app.Incoming) (app.Received, error) {
	c.n.Add(1)
	return app.Received{ID: "rcv"}, nil
}

func BenchmarkInitialSync(b *testing.B) {
	d := dovecottest.Start(b, dovecottest.Options{})
	seedMany(b, d, *benchMsgs)
	for b.Loop() {
		s, err := sqlstore.Open(context.Background(), b.TempDir()+"/sendonce.db")
		if err != nil {
			b.Fatal(err)
		}
		m := &core.Mailbox{Tenant: "t1", ID: "support", Address: "s@example.com",
			IMAP: []byte("imap://alice:secret@" + d.Addr + "?tls=none"), CreatedAt: time.Now()}
		if err := s.InTx(context.Background(), func(tx core.Tx) error { return tx.InsertMailbox(context.Background(), m) }); err != nil {
			b.Fatal(err)
		}
		rec := &countingReceiver{}
		ctx, cancel := context.WithCancel(context.Background())
		cfg := testConfig("bench")
		done := make(chan struct{})
		start := time.Now()
		go func() { defer close(done); imapsync.New(imapStore(s), opener(s), rec, cfg, nil).Run(ctx) }()
		var peak uint64
		var ms runtime.MemStats
		for deadline := time.Now().Add(10 * time.Minute); rec.n.Load() < int64(*benchMsgs) && time.Now().Before(deadline); {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			time.Sleep(20 * time.Millisecond)
		}
		elapsed := time.Since(start)
		cancel()
		<-done
		s.Close()
		b.ReportMetric(float64(rec.n.Load())/elapsed.Seconds(), "msgs/s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	}
}

func BenchmarkPlainFetchLoop(b *testing.B) {
	d := dovecottest.Start(b, dovecottest.Options{})
	seedMany(b, d, *benchMsgs)
	for b.Loop() {
		c := d.Dial(b, "alice")
		start := time.Now()
		if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			b.Fatal(err)
		}
		var all imap.SeqSet
		all.AddRange(1, 0) // "1:*"
		cmd := c.Fetch(all, &imap.FetchOptions{UID: true, Flags: true, InternalDate: true,
			BodySection: []*imap.FetchItemBodySection{{Peek: true}}})
		n := 0
		for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
			for item := msg.Next(); item != nil; item = msg.Next() {
				if body, ok := item.(imapclient.FetchItemDataBodySection); ok && body.Literal != nil {
					_, _ = io.Copy(io.Discard, body.Literal)
				}
			}
			n++
		}
		if err := cmd.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
		_ = c.Logout().Wait()
	}
}
