package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// zeros is a JSON array of n zeros.
func zeros(n int) string { return "[" + strings.Repeat("0,", n-1) + "0]" }

// TestJSONShape_HostileBodiesRefused: bodies whose decoding would
// materialise far more than their bytes (a 1 MiB array of zeros, deep
// nesting, a huge object, too many values in all) are refused 422
// validation_error on the native and the Resend routes before anything
// decodes them: one such request allocates a few times its size, not the
// tens of megabytes decoding it took.
func TestJSONShape_HostileBodiesRefused(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, AllowNoKey: true})
	// The measured body: some 1 MB of {"variables":{"a":[0,0,…]}}.
	flat := `{"variables":{"a":` + zeros(520_015) + `}}`
	members := make([]string, 12_000)
	for i := range members {
		members[i] = fmt.Sprintf(`"k%d":0`, i)
	}
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf(`"a%d":%s`, i, zeros(9_000))
	}
	bodies := map[string]string{
		"flat":    flat,
		"deep":    `{"variables":{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}`,
		"members": `{"variables":{` + strings.Join(members, ",") + `}}`,
		"values":  `{"variables":{` + strings.Join(many, ",") + `}}`,
	}
	for name, body := range bodies {
		for _, path := range []string{"/v1/send", "/emails"} {
			r := env.Do(t, sendoncetest.Request{Method: "POST", Path: path, Key: env.AdminKey, Body: body})
			if r.Status != http.StatusUnprocessableEntity {
				t.Errorf("%s %s: %d %.200s, want 422", name, path, r.Status, r.Body)
			}
			if path == "/v1/send" && r.ErrorCode() != core.CodeValidation {
				t.Errorf("%s: code %q, want %s", name, r.ErrorCode(), core.CodeValidation)
			}
		}
	}

	raw := []byte(flat)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: env.AdminKey, Body: raw})
	runtime.ReadMemStats(&after)
	if r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("flat: %d", r.Status)
	}
	// The server reads the body once (1 MiB); the client streams it. Before
	// the scan, decoding and fingerprinting it allocated over 40 MB.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("one %d-byte hostile body allocated %d MB", len(raw), grew>>20)
	}
}

// TestJSONShape_ValidBodyNearTheLimitsSends: a send whose variables hold
// arrays close to the element limit is accepted, and its retry replays the
// same bytes: the limits leave the contract of ordinary sends alone.
func TestJSONShape_ValidBodyNearTheLimitsSends(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	if r := env.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/t", Key: env.AdminKey,
		Body: map[string]string{"subject": "s", "text": "{{len .a}} {{len .b}}"}}); r.Status/100 != 2 {
		t.Fatalf("PUT template: %d %s", r.Status, r.Body)
	}
	body := `{"to":"ann@example.com","template_id":"t","variables":{"a":` + zeros(9_999) + `,"b":` + zeros(9_999) + `}}`
	first := env.Send(t, "near", body)
	if first.Status != http.StatusOK {
		t.Fatalf("send: %d %.300s", first.Status, first.Body)
	}
	again := env.Send(t, "near", body)
	if again.Status != http.StatusOK || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("retry: %d %s, want the first answer %s", again.Status, again.Body, first.Body)
	}
}

// TestJSONShape_HeavyBodyCountsInFlight: a small body of many values is
// charged what decoding it costs, not its bytes: while a large request
// holds most of --max-inflight-bytes it waits and is answered 503 with
// Retry-After, though a plain small send still goes through; once room is
// free it is read (and refused on its merits, here 422).
func TestJSONShape_HeavyBodyCountsInFlight(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, MaxInflightBytes: 2 << 20, InflightWait: 300 * time.Millisecond})
	release := holdLargeRequest(t, env)
	defer release()

	// 15,000 values in 30 kB: some 2 MB once decoded.
	heavy := `{"to":"ann@example.com","subject":"s","text":"x","variables":{"a":` + zeros(9_000) + `,"b":` + zeros(6_000) + `}}`
	r := env.Send(t, "heavy", heavy)
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != core.CodeUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("heavy small body: %d %.300s (Retry-After %q), want 503 with Retry-After", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if small := env.Send(t, "small", sendoncetest.Mail("ann@example.com", "small")); small.Status != http.StatusOK {
		t.Fatalf("a plain small send waited: %d %s", small.Status, small.Body)
	}
	release()
	if r := env.Send(t, "heavy", heavy); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("heavy body once room was free: %d %.300s, want 422 (variables without template_id)", r.Status, r.Body)
	}
}

// TestJSONShape_HeavyBodyOnA1MiBRouteCountsInFlight: the routes outside
// the send routes' bound (1 MiB bodies: templates, webhooks, …) charge
// their body's decoding cost too: while a large send holds the bound, a
// heavy template body waits and gets 503 with Retry-After; with room free
// it is read and answered on its merits.
func TestJSONShape_HeavyBodyOnA1MiBRouteCountsInFlight(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, MaxInflightBytes: 2 << 20, InflightWait: 300 * time.Millisecond})
	release := holdLargeRequest(t, env)
	defer release()

	heavy := `{"subject":"s","text":"x","extra":{"a":` + zeros(9_000) + `,"b":` + zeros(6_000) + `}}`
	r := env.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/t", Key: env.AdminKey, Body: heavy})
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("heavy template body: %d %.300s (Retry-After %q), want 503 with Retry-After", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	plain := map[string]string{"subject": "s", "text": "plain"}
	if r := env.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/p", Key: env.AdminKey, Body: plain}); r.Status/100 != 2 {
		t.Fatalf("a plain template waited: %d %s", r.Status, r.Body)
	}
	release()
	if r := env.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/t", Key: env.AdminKey, Body: heavy}); r.Status/100 != 4 {
		t.Fatalf("heavy template body once room was free: %d %.300s, want a 4xx on its merits", r.Status, r.Body)
	}
}

// holdLargeRequest starts a large send (1.6 MiB of attachment) that holds
// its room in the in-flight bound (three quarters of it) until release,
// which waits for its 200. It asks Expect: 100-continue, which the server
// answers only once the handler reads the body, past the bound: its client
// reading the body is the sign that it holds the room.
func holdLargeRequest(t *testing.T, env *sendoncetest.Env) (release func()) {
	t.Helper()
	big := sendoncetest.Mail("ann@example.com", "big")
	big["attachments"] = []map[string]any{{"filename": "a.bin", "content": base64.StdEncoding.EncodeToString(randomBytes(t, 1600<<10))}}
	raw := mustJSON(t, big)
	slow := &gatedBody{r: bytes.NewReader(raw), reading: make(chan struct{}), gate: make(chan struct{})}
	req, _ := http.NewRequest("POST", env.URL+"/v1/send", slow)
	req.ContentLength = int64(len(raw))
	req.Header.Set("Authorization", "Bearer "+env.AdminKey)
	req.Header.Set("Idempotency-Key", "holder")
	req.Header.Set("Expect", "100-continue")
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	held := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("holder: %v", err)
		}
		held <- resp
	}()
	var once sync.Once
	release = func() {
		once.Do(func() {
			slow.open()
			defer client.CloseIdleConnections()
			resp := <-held
			if resp == nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("holder: %v", resp)
			}
			resp.Body.Close()
		})
	}
	select {
	case <-slow.reading:
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("the holder's body was never asked for")
	}
	return release
}
