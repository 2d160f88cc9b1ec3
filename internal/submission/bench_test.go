package submission_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/emersion/go-smtp"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// BenchmarkAccept measures messages accepted per second over SMTP (one
// session, twenty sessions) beside POST /v1/send (one client, twenty) on
// the same instance, in the same run: the HTTP figure is the yardstick.
// Every message is new (its own Message-ID or Idempotency-Key), so every
// one is a durable commit. No workers run: acceptance alone is measured.
//
//	go test -run XXX -bench Accept -count 5 ./internal/submission/
func BenchmarkAccept(b *testing.B) {
	for _, backend := range sendoncetest.Backends(b) {
		env := sendoncetest.Start(b, sendoncetest.Options{Backend: backend, NoWorkers: true})
		addr := serve(b, env.Server.Submission, "127.0.0.1:0", false)
		for _, n := range []int{1, 20} {
			b.Run(fmt.Sprintf("%s/smtp/sessions=%d", backend, n), func(b *testing.B) {
				clients := make([]*smtp.Client, n)
				for i := range clients {
					clients[i] = dial(b, addr, env.AdminKey)
				}
				parallel(b, n, func(w int) error {
					_, err := submit(clients[w], "sender@example.com", []string{"ann@example.com"}, mail(newMsgID(), "Load test."))
					return err
				})
			})
			b.Run(fmt.Sprintf("%s/http/clients=%d", backend, n), func(b *testing.B) {
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}}
				body := []byte(`{"to":"ann@example.com","subject":"Hello","text":"Load test."}`)
				parallel(b, n, func(int) error {
					req, _ := http.NewRequestWithContext(context.Background(), "POST", env.URL+"/v1/send", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+env.AdminKey)
					req.Header.Set("Idempotency-Key", newMsgID())
					req.Header.Set("Content-Type", "application/json")
					resp, err := hc.Do(req)
					if err != nil {
						return err
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						return fmt.Errorf("POST /v1/send: %d", resp.StatusCode)
					}
					return nil
				})
			})
		}
	}
}

// parallel runs b.N operations on n workers and reports msgs/s.
func parallel(b *testing.B, n int, op func(worker int) error) {
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := op(w); err != nil {
					once.Do(func() { b.Error(err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
