package delivery_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// hookReceiver is a real webhook endpoint on 127.0.0.1 that keeps the
// type of every event posted to it.
type hookReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	types []string
	data  []map[string]any
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		h.mu.Lock()
		h.types, h.data = append(h.types, ev.Type), append(h.data, ev.Data)
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

// count is how many events of typ the endpoint got, and the last one's data.
func (h *hookReceiver) count(typ string) (int, map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, last := 0, map[string]any(nil)
	for i, t := range h.types {
		if t == typ {
			n, last = n+1, h.data[i]
		}
	}
	return n, last
}

func (h *hookReceiver) waitFor(t *testing.T, typ string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(waitLong); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, d := h.count(typ); n > 0 {
			return d
		}
	}
	t.Fatalf("the webhook endpoint got no %s", typ)
	return nil
}

// TestReputation_OnePauseAcrossTwoProcesses: two instances on one
// PostgreSQL database record complaints about the tenant's bulk mail at
// the same moment, every one of them past the threshold; the stream
// pauses once, and the subscribed endpoint gets one stream.paused (and,
// after the resume, one stream.resumed).
func TestReputation_OnePauseAcrossTwoProcesses(t *testing.T) {
	db := pgtest.NewDatabase(t)
	opts := sendoncetest.Options{DB: db, SMTP: true, Reputation: repThresholds, WebhookAllowPrivate: true}
	a := sendoncetest.Start(t, opts)
	b := sendoncetest.Start(t, opts)
	hook := newHookReceiver(t)
	r := a.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: a.AdminKey, IdemKey: "wh",
		Body: map[string]any{"endpoint": hook.URL + "/hook", "events": []string{"stream.paused", "stream.resumed"}}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create webhook: %d %s", r.Status, r.Body)
	}
	ids, rcpts := sendBulk(t, a, "n", 20)

	// Ten complaints through each process at once: with 20 sends, the
	// second complaint already crosses 0.1, so every later judgement in
	// either process sees the threshold crossed.
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, env := range []*sendoncetest.Env{a, b} {
		for j := i; j < len(ids); j += 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := env.Server.Service.RecordBounceReport(context.Background(), app.BounceReport{SendID: ids[j], Bound: -1, Raw: arfFor(rcpts[j])})
				if err != nil || res != app.ReportRecorded {
					t.Errorf("record the complaint about %s: %v %v", ids[j], res, err)
				}
			}()
		}
	}
	close(start)
	wg.Wait()

	data := hook.waitFor(t, "stream.paused")
	if data["stream"] != "bulk" || data["state"] != "paused" {
		t.Errorf("stream.paused data %v, want the bulk stream, paused", data)
	}
	time.Sleep(500 * time.Millisecond) // a second delivery would have come by now
	if n, _ := hook.count("stream.paused"); n != 1 {
		t.Errorf("the endpoint got %d stream.paused, want 1", n)
	}
	if n := a.QueryInt(t, `SELECT count(*) FROM webhook_deliveries WHERE event = 'stream_paused'`); n != 1 {
		t.Errorf("%d stream.paused deliveries queued, want 1", n)
	}
	for _, env := range []*sendoncetest.Env{a, b} {
		if st := reputationOf(t, env)["state"]; st != "paused" {
			t.Errorf("GET /v1/reputation: state %v, want paused from both processes", st)
		}
	}

	if r := b.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/reputation/resume", Key: a.AdminKey, IdemKey: "resume"}); r.Status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.Status, r.Body)
	}
	hook.waitFor(t, "stream.resumed")
	if r := a.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/reputation/resume", Key: a.AdminKey, IdemKey: "resume-again"}); r.Status != http.StatusOK {
		t.Fatalf("resume an active stream: %d %s", r.Status, r.Body)
	}
	time.Sleep(300 * time.Millisecond)
	if n, _ := hook.count("stream.resumed"); n != 1 {
		t.Errorf("the endpoint got %d stream.resumed, want 1 (resuming an active stream changes nothing)", n)
	}
}
