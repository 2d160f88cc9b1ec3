package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/sqlstore"
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

// benchPost posts body to base's /v1/send and returns the status and
// whether the answer was a replay.
func benchPost(c *http.Client, base, apiKey, idemKey string, body []byte) (int, bool, error) {
	req, err := http.NewRequest(http.MethodPost, base+sendPath, bytes.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
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

// BenchmarkSend_NewKey measures first requests: reserve, accept (the send
// row, its delivery job, and the stored response in one transaction),
// respond. The delivery workers deliver to the capture inbox meanwhile,
// on the same database. BenchmarkSend_NewKey_Yardstick is its yardstick.
func BenchmarkSend_NewKey(b *testing.B) {
	env := sendoncetest.Start(b, sendoncetest.Options{})
	benchNewKeys(b, env.URL, env.AdminKey, "bench-new-", false)
}

// BenchmarkSend_Replay measures retries of one finished request: reserve
// (which reads the stored response) and replay it.
// BenchmarkSend_Replay_Yardstick is its yardstick.
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
	if status, _, err := benchPost(client, env.URL, env.AdminKey, "bench-replay", body); err != nil || status != http.StatusOK {
		b.Fatalf("first request: status %d, error %v", status, err)
	}
	b.SetParallelism(benchClients)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			status, replayed, err := benchPost(client, env.URL, env.AdminKey, "bench-replay", body)
			if err != nil || status != http.StatusOK || !replayed {
				b.Errorf("status %d, replayed %v, error %v", status, replayed, err)
				return
			}
		}
	})
	reportReqPerSec(b)
}

// benchAnswer is a send as POST /v1/send answers it, for the yardsticks.
var benchAnswer = []byte(`{"id":"snd_01JDQ7Z8X4K7V2B8N6M5P0R1S2","object":"send","status":"queued","idempotency_key":"bench-replay",` +
	`"to":["bench@example.com"],"cc":[],"bcc":[],"from":"sender@example.com","subject":"benchmark","template_id":null,` +
	`"message_id":"<snd_01JDQ7Z8X4K7V2B8N6M5P0R1S2@example.com>","attempts":0,"last_error":null,"tags":{},` +
	`"created_at":"2026-12-01T10:00:00.123456Z","updated_at":"2026-12-01T10:00:00.123456Z","sent_at":null}`)

// yardstickServer serves POST /v1/send with a bare net/http handler: it
// reads the body, runs store (if any) and answers benchAnswer, with
// Idempotent-Replayed when replayed. It returns the server's URL.
func yardstickServer(b *testing.B, replayed bool, store func(key string, body []byte) error) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil && store != nil {
			err = store(r.Header.Get("Idempotency-Key"), body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if replayed {
			w.Header().Set(replayedHeader, "true")
		}
		_, _ = w.Write(benchAnswer)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// benchYardstick posts as the Send benchmarks do, to a yardstick server.
func benchYardstick(b *testing.B, url string, replayed bool) {
	benchNewKeys(b, url, "so_yardstick", "bench-yardstick-", replayed)
}

// benchNewKeys posts the benchmark's mail from benchClients callers, each
// request with a key of its own (prefix and a number), and wants 200 with
// Idempotent-Replayed as replayed says.
func benchNewKeys(b *testing.B, url, secret, prefix string, replayed bool) {
	client := benchClient()
	body := mail(b, "bench@example.com", "benchmark")
	var seq atomic.Int64
	b.SetParallelism(benchClients)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Sprintf("%s%d", prefix, seq.Add(1))
			status, gotReplayed, err := benchPost(client, url, secret, key, body)
			if err != nil || status != http.StatusOK || gotReplayed != replayed {
				b.Errorf("key %s: status %d, replayed %v, error %v", key, status, gotReplayed, err)
				return
			}
		}
	})
	reportReqPerSec(b)
}

// BenchmarkSend_NewKey_Yardstick is the least a durable API does for a
// new request: a bare net/http handler that inserts the body as one row
// of a SQLite database opened as sendonce opens its own (WAL,
// synchronous=FULL), one commit per request, and answers. The ratio of
// BenchmarkSend_NewKey's req/s to it is sendonce's idempotent accept
// against one unbatched durable insert; above 1 is the group commit's
// doing.
func BenchmarkSend_NewKey_Yardstick(b *testing.B) {
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(b.TempDir(), "yardstick.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if _, err := st.Exec(ctx, `CREATE TABLE requests (key TEXT PRIMARY KEY, body BLOB NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	benchYardstick(b, yardstickServer(b, false, func(key string, body []byte) error {
		_, err := st.Exec(ctx, `INSERT INTO requests (key, body) VALUES (?, ?)`, key, body)
		return err
	}), false)
}

// BenchmarkSend_Replay_Yardstick is a bare net/http handler answering a
// stored send with nothing looked up: the request's and the answer's own
// cost over the same client and connections. The ratio of
// BenchmarkSend_Replay's req/s to it is the share of the least a replay
// can cost that sendonce reaches.
func BenchmarkSend_Replay_Yardstick(b *testing.B) {
	benchYardstick(b, yardstickServer(b, true, nil), true)
}
