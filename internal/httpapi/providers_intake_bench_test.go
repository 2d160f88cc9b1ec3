package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/seslocal"
)

// SES events per second through POST /v1/providers/ses/events — each a
// signed SNS notification (SignatureVersion 2) of a Delivery for a send
// SES took, each with its own SNS MessageId, so each is verified,
// deduplicated and recorded (all name the one send: from the second on it
// is already delivered, so this is intake's steady cost, not a new
// send's first event) — against bare net/http reading and answering
// the same POSTs (the difference is sendonce's part: the signature, the
// dedupe record, the send's update). Signing happens before the timer.
// Run on a quiet machine (SQLite; PostgreSQL too with
// SENDONCE_TEST_POSTGRES_URL):
//
//	go test -run '^$' -bench SESIntake -benchtime 2000x ./internal/httpapi/

func BenchmarkSESIntake_Events(b *testing.B) {
	emu := seslocal.Start(b)
	f := startSNSFixture(b)
	for _, backend := range sendoncetest.Backends(b) {
		b.Run(string(backend), func(b *testing.B) {
			env := sendoncetest.Start(b, f.withSES(sendoncetest.Options{Backend: backend}, emu.URL))
			id := sendOne(b, env)
			sesID := env.WaitStatus(b, id, 20*time.Second, core.StatusSent)["provider_message_id"].(string)
			bodies := deliveryNotifications(b, f, sesID, id, b.N)
			b.ResetTimer()
			postAll(b, env.URL+"/v1/providers/ses/events", bodies)
			b.StopTimer()
			// The events named the send (not "unmatched", which would
			// measure less): it is delivered.
			if s := getSendMap(b, env, id); s["status"] != "delivered" {
				b.Fatalf("after %d Delivery events the send is %v", b.N, s["status"])
			}
		})
	}
}

func BenchmarkSESIntake_BareHTTP(b *testing.B) {
	f := startSNSFixture(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 512<<10))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"recorded"}`)
	}))
	b.Cleanup(srv.Close)
	bodies := deliveryNotifications(b, f, "ses-bench", "snd_bench", b.N)
	b.ResetTimer()
	postAll(b, srv.URL+"/v1/providers/ses/events", bodies)
}

// deliveryNotifications signs n distinct Delivery notifications for one
// send.
func deliveryNotifications(b *testing.B, f *snsFixture, sesID, sendID string, n int) [][]byte {
	b.Helper()
	event := sesEvent("Delivery", sesID, "", sendID, map[string]any{"delivery": map[string]any{
		"recipients": []string{"ann@example.com"}, "smtpResponse": "250 2.0.0 OK"}})
	out := make([][]byte, n)
	for i := range out {
		out[i] = f.message(b, "Notification", "2", event, time.Now(), nil)
	}
	return out
}

// postAll posts every body once, from parallel goroutines sharing one
// client, and fails on any answer but 200.
func postAll(b *testing.B, url string, bodies [][]byte) {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := bodies[next.Add(1)-1]
			if err := postOne(hc, url, body); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(len(bodies))/b.Elapsed().Seconds(), "events/s")
}

func postOne(hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain; charset=UTF-8")
	req.Header.Set("X-Amz-Sns-Message-Type", "Notification")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d %s", resp.StatusCode, answer)
	}
	return nil
}
