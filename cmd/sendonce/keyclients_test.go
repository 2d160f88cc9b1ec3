package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// keyClients retry one send per key, as a careful client does, until a
// server answers 200: a connection error (a server killed) and 409 or 503
// are retried with the same key; anything else fails the test. A 500 is a
// bug, not a retryable answer, even while a server is being killed: a
// killed server answers nothing, and a deadlock once surfaced exactly as a
// 500 in these multi-process tests, where retrying it hid it.
type keyClients struct {
	secret   string
	client   *http.Client
	deadline time.Time

	mu     sync.Mutex
	bodies map[string]map[string]bool // key → distinct 200 bodies

	completed atomic.Int32 // keys answered 200
}

func newKeyClients(secret string, timeout, within time.Duration) *keyClients {
	return &keyClients{secret: secret, client: &http.Client{Timeout: timeout},
		deadline: time.Now().Add(within), bodies: map[string]map[string]bool{}}
}

// send posts body under key to target(try)'s server (skipped when it
// says no) until a 200; down is the pause after a connection error. It
// may run on any goroutine: it reports with t.Errorf only.
func (c *keyClients) send(t *testing.T, key, body string, target func(try int) (string, bool), down time.Duration) {
	for try := 0; time.Now().Before(c.deadline); try++ {
		url, ok := target(try)
		if !ok {
			continue
		}
		req, _ := http.NewRequest("POST", url+"/v1/send", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+c.secret)
		req.Header.Set("Idempotency-Key", key)
		resp, err := c.client.Do(req)
		if err != nil {
			time.Sleep(down) // that server is gone: retry the same key
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			c.mu.Lock()
			if c.bodies[key] == nil {
				c.bodies[key] = map[string]bool{}
			}
			c.bodies[key][string(b)] = true
			c.mu.Unlock()
			c.completed.Add(1)
			return
		case http.StatusConflict, http.StatusServiceUnavailable:
			time.Sleep(20 * time.Millisecond)
		default:
			t.Errorf("key %s: unexpected %d %s", key, resp.StatusCode, b)
			return
		}
	}
	t.Errorf("key %s: no 200 before the deadline", key)
}

// get reads url's JSON into v with the clients' key, on the test
// goroutine.
func (c *keyClients) get(t *testing.T, url string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+c.secret)
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// oneSendEach checks that each key got one 200 body however often it
// was answered (replays are byte for byte) and that the server at url
// holds exactly one send under it; it returns the sends' ids, in the
// keys' order.
func (c *keyClients) oneSendEach(t *testing.T, url string, keys []string) []string {
	t.Helper()
	var ids []string
	for _, key := range keys {
		if n := c.distinct(key); n != 1 {
			t.Errorf("key %s: %d different 200 bodies, want 1 (replays are byte for byte)", key, n)
		}
		var list struct{ Data []sendView }
		c.get(t, url+"/v1/sends?idempotency_key="+key, &list)
		if len(list.Data) != 1 {
			t.Fatalf("key %s: %d sends, want exactly 1", key, len(list.Data))
		}
		ids = append(ids, list.Data[0].ID)
	}
	return ids
}

// decided waits (up to within) until every send of ids is sent or
// unknown (an attempt a kill hit is unknown once its lease runs out; a
// job a dead process had fetched is rescued by River within its 30s
// rescue interval), and counts them.
func (c *keyClients) decided(t *testing.T, url string, ids []string, within time.Duration) (sent, unknown int) {
	t.Helper()
	settle := time.Now().Add(within)
	for {
		sent, unknown = 0, 0
		for _, id := range ids {
			var s sendView
			c.get(t, url+"/v1/sends/"+id, &s)
			switch s.Status {
			case "sent":
				sent++
			case "unknown":
				unknown++
			}
		}
		if sent+unknown == len(ids) {
			return sent, unknown
		}
		if time.Now().After(settle) {
			t.Fatalf("%d of %d sends undecided after %v", len(ids)-sent-unknown, len(ids), within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// distinct is how many different 200 bodies key got (replays are byte for
// byte: 1).
func (c *keyClients) distinct(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bodies[key])
}

// requireRelayedOnce: the relay saw no Message-ID twice, every sent send,
// and of the unknown ones (a kill during their attempt) at most each once.
func requireRelayedOnce(t *testing.T, smtpd *smtptest.Server, sent, unknown int) {
	t.Helper()
	for id, n := range smtpd.MessageIDCounts() {
		if n != 1 {
			t.Errorf("Message-ID %s delivered %d times", id, n)
		}
	}
	if got := len(smtpd.Messages()); got < sent || got > sent+unknown {
		t.Errorf("relay got %d messages; %d sends are sent and %d unknown", got, sent, unknown)
	}
}
