package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// benchClients is how many client goroutines per GOMAXPROCS post at once:
// an API mostly waits on the disk (fsync on every accept), so a few
// concurrent clients per core is the realistic load.
const benchClients = 8

// benchClient keeps its connections alive across the parallel posters, so
// the benchmark measures the API rather than TCP handshakes (and does not
// run out of ephemeral ports).
func benchClient() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute},
	}
}

// benchPost posts body to /v1/send and returns the status and whether the
// answer was a replay.
func benchPost(c *http.Client, env *sendoncetest.Env, idemKey string, body []byte) (int, bool, error) {
	req, err := http.NewRequest(http.MethodPost, env.URL+sendPath, bytes.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Authorization", "Bearer "+env.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idemKey)
	resp, err := c.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, false, err
	}
	return resp.StatusCode, resp.Header.Get(replayedHeader) == "true", nil
}

func reportReqPerSec(b *testing.B) {
	b.Helper()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkSend_NewKey measures first requests: reserve, accept (send row,
// event, River job and stored response in one transaction), respond. The
// River workers deliver to the capture inbox meanwhile, on the same
// database.
func BenchmarkSend_NewKey(b *testing.B) {
	env := sendoncetest.Start(b, sendoncetest.Options{})
	client := benchClient()
	body := mail(b, "bench@example.com", "benchmark")
	var seq atomic.Int64
	b.SetParallelism(benchClients)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Sprintf("bench-new-%d", seq.Add(1))
			status, replayed, err := benchPost(client, env, key, body)
			if err != nil || status != http.StatusOK || replayed {
				b.Errorf("key %s: status %d, replayed %v, error %v", key, status, replayed, err)
				return
			}
		}
	})
	reportReqPerSec(b)
}

// BenchmarkSend_Replay measures retries of one finished request: reserve
// (which reads the stored response) and replay it.
func BenchmarkSend_Replay(b *testing.B) { benchReplay(b, sendoncetest.Options{}) }

// BenchmarkSend_ReplayRateLimited is BenchmarkSend_Replay with the
// in-memory per-key limiter counting every request (a limit it never
// reaches): the limiter's share of the cheapest route, as a ratio to
// BenchmarkSend_Replay in the same run.
func BenchmarkSend_ReplayRateLimited(b *testing.B) {
	benchReplay(b, sendoncetest.Options{RateLimit: 1 << 30, RateLimitWindow: time.Second})
}

func benchReplay(b *testing.B, o sendoncetest.Options) {
	env := sendoncetest.Start(b, o)
	client := benchClient()
	body := mail(b, "bench@example.com", "benchmark")
	if status, _, err := benchPost(client, env, "bench-replay", body); err != nil || status != http.StatusOK {
		b.Fatalf("first request: status %d, error %v", status, err)
	}
	b.SetParallelism(benchClients)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			status, replayed, err := benchPost(client, env, "bench-replay", body)
			if err != nil || status != http.StatusOK || !replayed {
				b.Errorf("status %d, replayed %v, error %v", status, replayed, err)
				return
			}
		}
	})
	reportReqPerSec(b)
}
