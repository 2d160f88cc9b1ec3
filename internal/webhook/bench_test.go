package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/webhook"
	"github.com/sendonce/sendonce/webhooksig"
)

func benchBackends(b *testing.B, fn func(b *testing.B, backend sendoncetest.Backend)) {
	for _, be := range sendoncetest.Backends(b) {
		b.Run(string(be), func(b *testing.B) { fn(b, be) })
	}
}

// sendsPerTx is how many sends one transaction of BenchmarkEventWrite
// writes: the commit (an fsync, which on a shared machine varies tenfold)
// is spread over them, so that the statements' own cost shows.
const sendsPerTx = 100

// eventWriteCase is one variant of BenchmarkEventWrite on its own
// database.
type eventWriteCase struct {
	name    string
	env     *sendoncetest.Env
	outcome string
	want    func(n int) int
	took    []time.Duration
}

// BenchmarkEventWrite is the write of a send's life that events ride on —
// the send row and its attempt's two events (attempt_started, sent) —
// with no webhook (none) and with one endpoint subscribed to every event
// type (one). history is none with a retry's events (attempt_started,
// attempt_failed), which are no webhook events and skip the queueing
// statement. The variants run on three databases, interleaved round by
// round (one transaction of sendsPerTx sends each), so that the shared
// machine's drift hits all alike; the metrics are each variant's ns per
// send over all rounds and the medians of the per-round ratios one/none
// (the added cost per send of one endpoint) and none/history (what the
// empty look-up costs a tenant without endpoints). No worker runs: the
// deliveries queue.
func BenchmarkEventWrite(b *testing.B) {
	benchBackends(b, func(b *testing.B, be sendoncetest.Backend) {
		ctx := context.Background()
		cases := []*eventWriteCase{
			{name: "history", outcome: core.EventAttemptFailed, want: func(int) int { return 0 }},
			{name: "none", outcome: core.EventSent, want: func(int) int { return 0 }},
			{name: "one", outcome: core.EventSent, want: func(n int) int { return n }},
		}
		for _, c := range cases {
			c.env = sendoncetest.Start(b, sendoncetest.Options{Backend: be, NoWorkers: true})
		}
		hook := &core.Webhook{ID: app.NewID("wh_"), Tenant: "default", Endpoint: "https://example.com/h",
			Events: core.WebhookTypes(), Status: core.WebhookEnabled, Secret: []byte("whsec_AAAA"),
			CreatedAt: time.Now(), UpdatedAt: time.Now()}
		if err := cases[2].env.Server.Store.InTx(ctx, func(tx core.Tx) error { return tx.InsertWebhook(ctx, hook) }); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for done := 0; done < b.N; done += sendsPerTx {
			n := min(sendsPerTx, b.N-done)
			for _, c := range cases {
				start := time.Now()
				if err := c.env.Server.Store.InTx(ctx, func(tx core.Tx) error { return writeSends(ctx, tx, n, c.outcome) }); err != nil {
					b.Fatal(err)
				}
				c.took = append(c.took, time.Since(start))
			}
		}
		b.StopTimer()
		for _, c := range cases {
			if got := c.env.QueryInt(b, `SELECT count(*) FROM webhook_deliveries`); got != c.want(b.N) {
				b.Fatalf("%s: %d deliveries queued, want %d", c.name, got, c.want(b.N))
			}
			var sum time.Duration
			for _, d := range c.took {
				sum += d
			}
			b.ReportMetric(float64(sum.Nanoseconds())/float64(b.N), c.name+"-ns/send")
		}
		b.ReportMetric(medianRatio(cases[2].took, cases[1].took), "one/none")
		b.ReportMetric(medianRatio(cases[1].took, cases[0].took), "none/history")
	})
}

func writeSends(ctx context.Context, tx core.Tx, n int, outcome string) error {
	for range n {
		now := time.Now().UTC()
		id := app.NewID("snd_")
		s := &core.Send{ID: id, Tenant: "default", MailboxID: "default", Status: core.StatusSent,
			From: "a@example.com", To: []string{"b@example.com"}, Subject: "s", Text: "t",
			MessageID: "<" + id + "@example.com>", CreatedAt: now, UpdatedAt: now}
		if err := tx.InsertSend(ctx, s); err != nil {
			return err
		}
		if err := tx.AddEvent(ctx, s.ID, core.Event{Type: core.EventAttemptStarted, At: now, Detail: "attempt 1"},
			core.Event{Type: outcome, At: now, Detail: "ok"}); err != nil {
			return err
		}
	}
	return nil
}

// medianRatio is the median over rounds of a[i]/b[i].
func medianRatio(a, b []time.Duration) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = float64(a[i]) / float64(b[i])
	}
	slices.Sort(r)
	return r[len(r)/2]
}

// deliveriesDeadline bounds BenchmarkDeliveries' wait for its deliveries:
// far more than the second or so -benchtime asks of a round.
const deliveriesDeadline = time.Minute

// BenchmarkDeliveries: b.N queued deliveries through the worker (claim,
// sign, POST to a local endpoint, record) against the yardstick of the
// same number of signed POSTs of the same body to the same endpoint with
// the same concurrency and no database (raw). deliveries/s is the figure;
// worker/raw the ratio.
func BenchmarkDeliveries(b *testing.B) {
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer ep.Close()
	secret, _ := webhooksig.NewSecret()
	body := []byte(`{"type":"email.sent","created_at":"2026-12-01T09:30:01Z","data":{"email_id":"snd_1","to":["ada@example.com"],"subject":"Hi","tags":{}}}`)
	const concurrency = 32
	b.Run("raw", func(b *testing.B) {
		client := &http.Client{Transport: netpolicy.MustParse("private").HTTPTransport()}
		var wg sync.WaitGroup
		jobs := make(chan int)
		for range concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					req, _ := http.NewRequest(http.MethodPost, ep.URL, bytes.NewReader(body))
					_ = webhooksig.SetHeaders(req.Header, secret, fmt.Sprint("evt_", i), time.Now(), body)
					res, err := client.Do(req)
					if err != nil {
						b.Error(err)
						continue
					}
					res.Body.Close()
				}
			}()
		}
		start := time.Now()
		for i := range b.N {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
	})
	benchBackends(b, func(b *testing.B, be sendoncetest.Backend) {
		env := sendoncetest.Start(b, sendoncetest.Options{Backend: be, NoWorkers: true})
		hook := &core.Webhook{ID: app.NewID("wh_"), Tenant: "default", Endpoint: ep.URL, Events: core.WebhookTypes(),
			Status: core.WebhookEnabled, Secret: []byte(secret), CreatedAt: time.Now(), UpdatedAt: time.Now()}
		ctx := context.Background()
		if err := env.Server.Store.InTx(ctx, func(tx core.Tx) error { return tx.InsertWebhook(ctx, hook) }); err != nil {
			b.Fatal(err)
		}
		now := time.Now().UTC()
		for i := range b.N {
			env.Exec(b, `INSERT INTO webhook_deliveries (webhook_id, event_id, tenant, send_id, event, status, tries, next_attempt_at, body, created_at, updated_at)
				VALUES (?, ?, 'default', 'snd_x', 'sent', 'pending', 0, ?, ?, ?, ?)`,
				hook.ID, fmt.Sprintf("evt_%09d", i), now.UnixMicro(), body, now.UnixMicro(), now.UnixMicro())
		}
		w := webhook.NewWorker(env.Server.Store, webhook.WorkerConfig{Concurrency: concurrency, PerEndpoint: concurrency,
			Policy: netpolicy.MustParse("private"), Poll: 5 * time.Millisecond}, nil)
		b.ResetTimer()
		start := time.Now()
		w.Start()
		defer func() { _ = w.Stop(ctx) }()
		// A delivery that never succeeds (refused by the policy, failing
		// for good) would otherwise keep the benchmark waiting for ever.
		deadline := start.Add(deliveriesDeadline)
		for done := 0; done < b.N; done = env.QueryInt(b, `SELECT count(*) FROM webhook_deliveries WHERE status = 'success'`) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d deliveries succeeded in %v", done, b.N, deliveriesDeadline)
			}
			time.Sleep(2 * time.Millisecond)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
	})
}
