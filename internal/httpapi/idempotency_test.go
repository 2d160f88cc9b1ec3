package httpapi_test

// These tests prove the rules of docs/api.md, "Idempotency",
// one test per rule, against a whole running instance: a real database
// (each test runs on SQLite and on PostgreSQL, see sendoncetest.EachBackend),
// real delivery workers, real HTTP on 127.0.0.1 and, where delivery is counted,
// a recording SMTP server as the relay. Nothing of ours is mocked; the only
// seam used is the store's enqueuer (to make acceptance fail with a 5xx),
// and a few tests call the store directly to play a request that is still
// running, or a process that died holding a key.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

const (
	sendPath       = "/v1/send"
	replayedHeader = "Idempotent-Replayed"
	// deliveryTimeout bounds every wait for a delivery.
	deliveryTimeout = 30 * time.Second
)

// --- helpers ---------------------------------------------------------------

// mail returns a valid send body, marshalled once so that the bytes sent are
// the bytes fingerprinted.
func mail(t testing.TB, to, subject string) []byte {
	t.Helper()
	return mustJSON(t, sendoncetest.Mail(to, subject))
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return b
}

func fingerprint(t testing.TB, body []byte) string {
	t.Helper()
	fp, err := idempotency.Fingerprint(body)
	if err != nil {
		t.Fatalf("fingerprint %s: %v", body, err)
	}
	return fp
}

// sendScope is the scope POST /v1/send gives key for tenant "default".
func sendScope(key string) idempotency.Scope {
	return idempotency.Scope{Tenant: "default", Method: http.MethodPost, Route: sendPath, Key: key}
}

// post sends body to POST /v1/send with the given API key and
// Idempotency-Key.
func post(t testing.TB, env *sendoncetest.Env, apiKey, idemKey string, body []byte) *sendoncetest.Response {
	t.Helper()
	return env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: sendPath, Key: apiKey, IdemKey: idemKey, Body: body})
}

// requireOriginal fails unless r is a first response with the status.
func requireOriginal(t testing.TB, r *sendoncetest.Response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if v := r.Header.Values(replayedHeader); len(v) != 0 {
		t.Fatalf("a first response carries %s: %q", replayedHeader, v)
	}
}

// requireReplayOf fails unless r replays orig byte for byte.
func requireReplayOf(t testing.TB, orig, r *sendoncetest.Response) {
	t.Helper()
	if r.Status != orig.Status {
		t.Fatalf("replay status %d, want the original %d: %s", r.Status, orig.Status, r.Body)
	}
	if got := r.Header.Get(replayedHeader); got != "true" {
		t.Fatalf("replay has %s %q, want \"true\"", replayedHeader, got)
	}
	if !bytes.Equal(r.Body, orig.Body) {
		t.Fatalf("replay body differs from the original\n got %q\nwant %q", r.Body, orig.Body)
	}
	if got, want := r.Header.Get("Content-Type"), orig.Header.Get("Content-Type"); got != want {
		t.Fatalf("replay Content-Type %q, want the original %q", got, want)
	}
}

// requireError fails unless r is the API error with that status and code.
func requireError(t testing.TB, r *sendoncetest.Response, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrorCode() != code {
		t.Fatalf("got %d %q, want %d %q: %s", r.Status, r.ErrorCode(), status, code, r.Body)
	}
	if v := r.Header.Values(replayedHeader); len(v) != 0 {
		t.Fatalf("%d %s carries %s: %q", status, code, replayedHeader, v)
	}
}

func sendID(t testing.TB, r *sendoncetest.Response) string {
	t.Helper()
	id, _ := r.JSON(t)["id"].(string)
	if !strings.HasPrefix(id, "snd_") {
		t.Fatalf("response has no send id: %s", r.Body)
	}
	return id
}

// listByKey is GET /v1/sends?idempotency_key=K as apiKey sees it.
func listByKey(t testing.TB, env *sendoncetest.Env, apiKey, idemKey string) []map[string]any {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/sends?idempotency_key=" + url.QueryEscape(idemKey), Key: apiKey})
	if r.Status != http.StatusOK {
		t.Fatalf("list sends by key: %d %s", r.Status, r.Body)
	}
	return listData(t, r)
}

func listData(t testing.TB, r *sendoncetest.Response) []map[string]any {
	t.Helper()
	var l struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
		Next   *string          `json:"next"`
	}
	if err := json.Unmarshal(r.Body, &l); err != nil || l.Object != "list" {
		t.Fatalf("not a list (%v): %s", err, r.Body)
	}
	return l.Data
}

// allSends pages through GET /v1/sends and returns every send of apiKey's
// tenant.
func allSends(t testing.TB, env *sendoncetest.Env, apiKey string) []map[string]any {
	t.Helper()
	var out []map[string]any
	after := ""
	for range 100 { // 100 pages of 100: far more than any test makes
		r := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/sends?limit=100&after=" + url.QueryEscape(after), Key: apiKey})
		if r.Status != http.StatusOK {
			t.Fatalf("list sends: %d %s", r.Status, r.Body)
		}
		out = append(out, listData(t, r)...)
		next, _ := r.JSON(t)["next"].(string)
		if next == "" {
			return out
		}
		after = next
	}
	t.Fatalf("list sends: more than 100 pages")
	return nil
}

// count runs a count(*) query on the instance's database.
func count(t testing.TB, env *sendoncetest.Env, query string, args ...any) int {
	t.Helper()
	return env.QueryInt(t, query, args...)
}

// deliverableSends counts the send rows that are (or were) delivery jobs.
// There is no job table: since the lean write path a send row is its own
// delivery job (the workers claim send rows, ClaimDue), so every send but
// one held for approval or canceled is one job, finished or not. A count
// equal to the number of requests accepted means that no retry made a
// second job; that the one job reached the relay once is for
// requireDeliveredOnce and the SMTP server's count to show.
func deliverableSends(t testing.TB, env *sendoncetest.Env) int {
	t.Helper()
	return count(t, env, `SELECT count(*) FROM sends WHERE status NOT IN ('pending_approval', 'canceled')`)
}

// idempotencyRows counts the stored rows of one key, whatever their scope.
func idempotencyRows(t testing.TB, env *sendoncetest.Env, key string) int {
	t.Helper()
	return count(t, env, `SELECT count(*) FROM `+sendoncetest.IdempotencyRecords+` r WHERE key = ?`, key)
}

// waitMessages polls the recording SMTP server until it holds at least n
// messages, and fails the test after timeout.
func waitMessages(t testing.TB, env *sendoncetest.Env, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := len(env.SMTP.Messages())
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SMTP server has %d messages after %v, want %d", got, timeout, n)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// requireDeliveredOnce waits until the send is sent and checks that the SMTP
// server got exactly one message with its Message-ID.
func requireDeliveredOnce(t testing.TB, env *sendoncetest.Env, id string) {
	t.Helper()
	s := env.WaitStatus(t, id, deliveryTimeout, core.StatusSent)
	msgID := strings.Trim(s["message_id"].(string), "<>")
	if n := env.SMTP.MessageIDCounts()[msgID]; n != 1 {
		t.Fatalf("SMTP server got %d messages with Message-ID %s, want 1", n, msgID)
	}
}

// reserve writes a reservation row that holds key in flight for lease, as
// a request of an older release held it (or one that died holding it). The
// server writes none itself, since it decides a key inside the send's
// transaction, but a database may still hold some, and each must hold its
// key until its lease ends.
func reserve(t testing.TB, env *sendoncetest.Env, sc idempotency.Scope, body []byte, now time.Time, lease time.Duration) string {
	t.Helper()
	token := idempotency.NewToken()
	env.Exec(t, `INSERT INTO idempotency_keys
		(tenant, method, route, key, fingerprint, state, token, locked_until, created_at)
		VALUES (?, ?, ?, ?, ?, 'in_flight', ?, ?, ?)`,
		sc.Tenant, sc.Method, sc.Route, sc.Key, fingerprint(t, body), token, now.Add(lease).UnixMicro(), now.UnixMicro())
	return token
}

// release drops the reservation token holds, as its request would have on
// a 5xx.
func release(t testing.TB, env *sendoncetest.Env, sc idempotency.Scope, token string) {
	t.Helper()
	env.Exec(t, `DELETE FROM idempotency_keys
		WHERE tenant = ? AND method = ? AND route = ? AND key = ? AND token = ? AND state = 'in_flight'`,
		sc.Tenant, sc.Method, sc.Route, sc.Key, token)
}

// doHeader performs a POST /v1/send with the admin key and exactly the
// given Idempotency-Key header lines (Env.Do sets at most one).
func doHeader(t testing.TB, env *sendoncetest.Env, values []string, body []byte) *sendoncetest.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, env.URL+sendPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+env.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	for _, v := range values {
		req.Header.Add("Idempotency-Key", v)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", sendPath, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatalf("read response: %v", err)
	}
	return &sendoncetest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b.Bytes()}
}

// --- the rules -------------------------------------------------------------

// Same key, same body, first finished: the stored response comes back byte
// for byte with Idempotent-Replayed, and nothing is sent again.
func TestIdempotency_ReplaysByteForByte(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		body := mail(t, "alice@example.com", "replay")

		first := post(t, env, env.AdminKey, "replay-1", body)
		requireOriginal(t, first, http.StatusOK)
		if ct := first.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
		id := sendID(t, first)
		for range 3 {
			requireReplayOf(t, first, post(t, env, env.AdminKey, "replay-1", body))
		}

		if l := listByKey(t, env, env.AdminKey, "replay-1"); len(l) != 1 || l[0]["id"] != id {
			t.Fatalf("sends with the key: %v, want only %s", l, id)
		}
		requireDeliveredOnce(t, env, id)
		// Replays after delivery still answer with the first response (status
		// queued), not the send as it is now.
		requireReplayOf(t, first, post(t, env, env.AdminKey, "replay-1", body))
		if n := len(env.SMTP.Messages()); n != 1 {
			t.Errorf("SMTP server got %d messages, want 1", n)
		}
		if n := deliverableSends(t, env); n != 1 {
			t.Errorf("%d deliverable sends, want 1", n)
		}
	})
}

// The fingerprint is the SHA-256 of the RFC 8785 form: member order, white
// space and string escapes do not make a different request.
func TestIdempotency_FingerprintIsCanonical(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		body := []byte(`{"to":"bob@example.com","subject":"Hi","text":"x","tags":{"a":"1","b":"2"}}`)
		same := []byte("{\n  \"tags\" : { \"b\":\"2\",\t\"a\":\"1\" },\r\n  \"text\": \"x\", \"subject\": \"\\u0048i\",\n  \"to\" : \"bob@example.com\"\n}\n")

		first := post(t, env, env.AdminKey, "canonical-1", body)
		requireOriginal(t, first, http.StatusOK)
		requireReplayOf(t, first, post(t, env, env.AdminKey, "canonical-1", same))
		if l := listByKey(t, env, env.AdminKey, "canonical-1"); len(l) != 1 {
			t.Fatalf("%d sends with the key, want 1", len(l))
		}
	})
}

// Same key, different body: 422 idempotency_key_reused and nothing runs,
// whether the first request has finished or is still running.
func TestIdempotency_ReusedKeyWithOtherBodyIs422(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		a, b := mail(t, "carol@example.com", "first body"), mail(t, "carol@example.com", "second body")

		t.Run("finished", func(t *testing.T) {
			first := post(t, env, env.AdminKey, "reused-1", a)
			requireOriginal(t, first, http.StatusOK)
			requireError(t, post(t, env, env.AdminKey, "reused-1", b), http.StatusUnprocessableEntity, "idempotency_key_reused")
			l := listByKey(t, env, env.AdminKey, "reused-1")
			if len(l) != 1 || l[0]["subject"] != "first body" {
				t.Fatalf("sends with the key: %v, want only the first", l)
			}
			// The key still replays its first outcome.
			requireReplayOf(t, first, post(t, env, env.AdminKey, "reused-1", a))
		})

		t.Run("in flight", func(t *testing.T) {
			sc := sendScope("reused-2")
			token := reserve(t, env, sc, a, env.Clock.Now(), time.Minute)
			requireError(t, post(t, env, env.AdminKey, "reused-2", b), http.StatusUnprocessableEntity, "idempotency_key_reused")
			if l := listByKey(t, env, env.AdminKey, "reused-2"); len(l) != 0 {
				t.Fatalf("a refused request created %d sends", len(l))
			}
			release(t, env, sc, token)
		})

		if n := deliverableSends(t, env); n != 1 {
			t.Errorf("%d deliverable sends, want 1", n)
		}
	})
}

// Same key and body while the first is running: 409 idempotency_key_in_use
// with Retry-After: 1, and nothing is stored for it.
func TestIdempotency_InFlightIs409(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		body := mail(t, "dave@example.com", "in flight")
		sc := sendScope("inflight-1")
		token := reserve(t, env, sc, body, env.Clock.Now(), time.Minute)

		for range 2 {
			r := post(t, env, env.AdminKey, "inflight-1", body)
			requireError(t, r, http.StatusConflict, "idempotency_key_in_use")
			if got := r.Header.Get("Retry-After"); got != "1" {
				t.Fatalf("Retry-After %q, want \"1\"", got)
			}
		}
		// The 409s changed nothing: the holder's reservation is intact (its
		// token still releases it) and no send exists.
		if n := count(t, env, `SELECT count(*) FROM idempotency_keys WHERE key = ? AND token = ? AND state = 'in_flight'`, sc.Key, token); n != 1 {
			t.Fatalf("the holder's reservation is gone or changed")
		}
		if l := listByKey(t, env, env.AdminKey, "inflight-1"); len(l) != 0 {
			t.Fatalf("%d sends while in flight, want 0", len(l))
		}
		release(t, env, sc, token)

		r := post(t, env, env.AdminKey, "inflight-1", body)
		requireOriginal(t, r, http.StatusOK)
		if l := listByKey(t, env, env.AdminKey, "inflight-1"); len(l) != 1 {
			t.Fatalf("%d sends, want 1", len(l))
		}
	})
}

// 8 concurrent requests with one key: one send, one delivered message; each
// answer is the original, a replay of it, or 409.
func TestIdempotency_ConcurrentDuplicatesSendOnce(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		body := mail(t, "erin@example.com", "concurrent")
		rs, errs := concurrently(env, "concurrent-1", body, 8)
		for _, err := range errs {
			t.Fatal(err)
		}
		original := checkRace(t, rs)
		requireDeliveredOnce(t, env, sendID(t, original))
		if l := listByKey(t, env, env.AdminKey, "concurrent-1"); len(l) != 1 {
			t.Fatalf("%d sends with the key, want 1", len(l))
		}
		if n := len(env.SMTP.Messages()); n != 1 {
			t.Errorf("SMTP server got %d messages, want 1", n)
		}
		if n := deliverableSends(t, env); n != 1 {
			t.Errorf("%d deliverable sends, want 1", n)
		}
	})
}

// concurrently starts n identical requests at once (behind a barrier) and
// returns their responses and any transport errors.
func concurrently(env *sendoncetest.Env, idemKey string, body []byte, n int) ([]*sendoncetest.Response, []error) {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		rs    = make([]*sendoncetest.Response, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rs[i], errs[i] = env.TryDo(sendoncetest.Request{Method: http.MethodPost, Path: sendPath, Key: env.AdminKey, IdemKey: idemKey, Body: body})
		}()
	}
	close(start)
	wg.Wait()
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("request %d with key %s: %w", i, idemKey, err))
		}
	}
	return rs, failed
}

// checkRace checks the answers to one key's concurrent requests: exactly one
// original 200, every other answer a byte-identical replay of it or 409
// idempotency_key_in_use with Retry-After: 1. It returns the original.
func checkRace(t testing.TB, rs []*sendoncetest.Response) *sendoncetest.Response {
	t.Helper()
	var original *sendoncetest.Response
	var ok []*sendoncetest.Response
	for _, r := range rs {
		switch {
		case r.Status == http.StatusOK && r.Header.Get(replayedHeader) == "":
			if original != nil {
				t.Fatalf("two original responses for one key:\n%s\n%s", original.Body, r.Body)
			}
			original = r
		case r.Status == http.StatusOK:
			ok = append(ok, r)
		case r.Status == http.StatusConflict:
			if r.ErrorCode() != "idempotency_key_in_use" || r.Header.Get("Retry-After") != "1" {
				t.Fatalf("409 %q, Retry-After %q: want idempotency_key_in_use, 1", r.ErrorCode(), r.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("unexpected answer %d: %s", r.Status, r.Body)
		}
	}
	if original == nil {
		t.Fatalf("no original 200 among %d answers", len(rs))
	}
	for _, r := range ok {
		requireReplayOf(t, original, r)
	}
	return original
}

// 200 keys, 8 concurrent requests each: 200 sends, 200 messages, no
// Message-ID twice.
func TestIdempotency_ManyKeysConcurrentlySendEachOnce(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		const (
			keys      = 200
			perKey    = 8
			keyGroups = 64 / perKey // at most 64 requests in flight
		)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true})
		var (
			wg        sync.WaitGroup
			sem       = make(chan struct{}, keyGroups)
			mu        sync.Mutex
			originals = map[string]string{} // send id -> key
			failures  []string
		)
		for i := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				key := fmt.Sprintf("many-%03d", i)
				// No t.Fatal off the test goroutine: rec collects failures.
				rec := &recorder{TB: t}
				var original *sendoncetest.Response
				var errs []error
				func() {
					defer rec.recoverFatal()
					var rs []*sendoncetest.Response
					rs, errs = concurrently(env, key, mail(rec, fmt.Sprintf("user%d@example.com", i), "many "+key), perKey)
					if len(errs) == 0 {
						original = checkRace(rec, rs)
					}
				}()
				mu.Lock()
				defer mu.Unlock()
				for _, err := range errs {
					failures = append(failures, err.Error())
				}
				failures = append(failures, rec.failures...)
				if original != nil {
					var s struct{ ID string }
					_ = json.Unmarshal(original.Body, &s)
					originals[s.ID] = key
				}
			}()
		}
		wg.Wait()
		for i, f := range failures {
			if i == 10 {
				t.Fatalf("... and %d more failures", len(failures)-10)
			}
			t.Error(f)
		}
		if t.Failed() {
			t.FailNow()
		}
		if len(originals) != keys {
			t.Fatalf("%d distinct sends in the original answers, want %d", len(originals), keys)
		}

		sends := allSends(t, env, env.AdminKey)
		if len(sends) != keys {
			t.Fatalf("%d sends, want %d", len(sends), keys)
		}
		msgIDs := map[string]bool{}
		for _, s := range sends {
			id, _ := s["id"].(string)
			if originals[id] == "" || originals[id] != s["idempotency_key"] {
				t.Fatalf("send %s (key %v) is not one of the original answers", id, s["idempotency_key"])
			}
			msgIDs[strings.Trim(s["message_id"].(string), "<>")] = true
		}
		if n := deliverableSends(t, env); n != keys {
			t.Fatalf("%d deliverable sends, want %d", n, keys)
		}

		waitMessages(t, env, keys, 60*time.Second)
		msgs := env.SMTP.Messages()
		if len(msgs) != keys {
			t.Fatalf("SMTP server got %d messages, want %d", len(msgs), keys)
		}
		for id, n := range env.SMTP.MessageIDCounts() {
			if n != 1 {
				t.Errorf("Message-ID %s delivered %d times", id, n)
			}
			if !msgIDs[id] {
				t.Errorf("Message-ID %s belongs to no send", id)
			}
		}
	})
}

// recorder is a testing.TB for goroutines: Fatal and Error are recorded,
// Fatal unwinds to recoverFatal instead of calling runtime.Goexit.
type recorder struct {
	testing.TB
	failures []string
}

type fatalUnwind struct{}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(fatalUnwind{})
}

func (r *recorder) Fatal(args ...any) {
	r.failures = append(r.failures, fmt.Sprint(args...))
	panic(fatalUnwind{})
}

func (r *recorder) recoverFatal() {
	if p := recover(); p != nil {
		if _, ok := p.(fatalUnwind); !ok {
			panic(p)
		}
	}
}

// A 4xx the handler returns (here a validation error) is the key's first
// outcome: it replays, and the key cannot be reused with a corrected body.
func TestIdempotency_ValidationErrorIsStoredAndReplayed(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		bad := mustJSON(t, map[string]any{"to": "frank@example.com", "text": "no subject"})

		first := post(t, env, env.AdminKey, "validation-1", bad)
		requireError(t, first, http.StatusUnprocessableEntity, "validation_error")
		if p := first.JSON(t)["error"].(map[string]any)["param"]; p != "subject" {
			t.Fatalf("param %v, want subject", p)
		}
		requireReplayOf(t, first, post(t, env, env.AdminKey, "validation-1", bad))

		fixed := mail(t, "frank@example.com", "now with a subject")
		requireError(t, post(t, env, env.AdminKey, "validation-1", fixed), http.StatusUnprocessableEntity, "idempotency_key_reused")
		if l := listByKey(t, env, env.AdminKey, "validation-1"); len(l) != 0 {
			t.Fatalf("%d sends, want 0", len(l))
		}
	})
}

// 401, 403, 409, 413 and 400 invalid_json are not stored, whether the auth
// layer, the body reader or the handler itself refused: the same key then
// runs afresh with a valid request.
func TestIdempotency_RefusalsAreNotStored(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		_, readOnly := env.NewKey(t, app.NewKeyParams{Name: "read only", Scopes: []core.Scope{core.ScopeRead}})
		_, otherMailbox := env.NewKey(t, app.NewKeyParams{Name: "other mailbox", Scopes: []core.Scope{core.ScopeSend}, Mailboxes: []string{"other"}})
		huge := mustJSON(t, map[string]any{"to": "gina@example.com", "subject": "huge", "text": strings.Repeat("x", 41<<20)})
		mailbox := func(id string) []byte {
			return mustJSON(t, map[string]any{"id": id, "address": id + "@example.com"})
		}
		created := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "refused-setup", Body: mailbox("taken")})
		requireOriginal(t, created, http.StatusCreated)

		tests := []struct {
			name   string
			path   string
			apiKey string
			body   []byte
			status int
			code   string
			// valid is a different, valid body for the same path: had the
			// refusal been stored, it would get 422 or a replay.
			valid      []byte
			wantStatus int
		}{
			{"401 no API key", sendPath, "", mail(t, "gina@example.com", "a"), http.StatusUnauthorized, "unauthorized", nil, http.StatusOK},
			{"401 unknown API key", sendPath, "so_unknown_secret", mail(t, "gina@example.com", "b"), http.StatusUnauthorized, "unauthorized", nil, http.StatusOK},
			{"403 no send scope", sendPath, readOnly, mail(t, "gina@example.com", "c"), http.StatusForbidden, "forbidden", nil, http.StatusOK},
			{"403 from the handler: mailbox not allowed", sendPath, otherMailbox, mail(t, "gina@example.com", "d"), http.StatusForbidden, "forbidden", nil, http.StatusOK},
			{"413 body over 40 MiB (--max-request-size)", sendPath, env.AdminKey, huge, http.StatusRequestEntityTooLarge, "payload_too_large", nil, http.StatusOK},
			{"400 invalid_json", sendPath, env.AdminKey, []byte(`{"to": "gina@example.com", "subject": `), http.StatusBadRequest, "invalid_json", nil, http.StatusOK},
			{"409 from the handler: mailbox exists", "/v1/mailboxes", env.AdminKey, mailbox("taken"), http.StatusConflict, "conflict", mailbox("fresh"), http.StatusCreated},
		}
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				key := fmt.Sprintf("refused-%d", i)
				r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: tc.path, Key: tc.apiKey, IdemKey: key, Body: tc.body})
				requireError(t, r, tc.status, tc.code)
				if n := idempotencyRows(t, env, key); n != 0 {
					t.Fatalf("%d idempotency rows after %d, want 0", n, tc.status)
				}
				valid := tc.valid
				if valid == nil {
					valid = mail(t, "gina@example.com", "valid "+key)
				}
				r = env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: tc.path, Key: env.AdminKey, IdemKey: key, Body: valid})
				requireOriginal(t, r, tc.wantStatus)
			})
		}
	})
}

// A 5xx is not stored and its transaction rolled back: no send, no job, the
// key free; a retry with the same key runs afresh and sends once.
func TestIdempotency_ServerErrorRollsBackAndFreesKey(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		// The database refuses a write of the accept's transaction: the send
		// row itself, or the stored answer after the send was written.
		failures := []struct {
			name  string
			table string
		}{
			{"send row refused", "sends"},
			{"stored answer refused", ""}, // in the send's row or in idempotency_keys
		}
		for i, tc := range failures {
			t.Run(tc.name, func(t *testing.T) {
				key := fmt.Sprintf("fail-%d", i)
				body := mail(t, "hank@example.com", "after a 500")
				sendsBefore, deliverableBefore := count(t, env, `SELECT count(*) FROM sends`), deliverableSends(t, env)

				var restore func()
				if tc.table == "" {
					restore = env.FailStoredAnswers(t)
				} else {
					restore = env.FailWrites(t, tc.table)
				}
				r := post(t, env, env.AdminKey, key, body)
				restore()
				requireError(t, r, http.StatusInternalServerError, "internal_error")
				if strings.Contains(string(r.Body), "injected") || strings.Contains(string(r.Body), "fault") {
					t.Errorf("an internal error is shown to the client: %s", r.Body)
				}
				if l := listByKey(t, env, env.AdminKey, key); len(l) != 0 {
					t.Fatalf("%d sends after a 500, want 0 (rolled back)", len(l))
				}
				if n := count(t, env, `SELECT count(*) FROM sends`); n != sendsBefore {
					t.Fatalf("%d send rows after a 500, want %d", n, sendsBefore)
				}
				if n := deliverableSends(t, env); n != deliverableBefore {
					t.Fatalf("%d deliverable sends after a 500, want %d", n, deliverableBefore)
				}
				if n := idempotencyRows(t, env, key); n != 0 {
					t.Fatalf("the key is still held after a 500 (%d rows)", n)
				}

				retry := post(t, env, env.AdminKey, key, body)
				requireOriginal(t, retry, http.StatusOK)
				requireDeliveredOnce(t, env, sendID(t, retry))
				if l := listByKey(t, env, env.AdminKey, key); len(l) != 1 {
					t.Fatalf("%d sends, want 1", len(l))
				}
			})
		}
		if n := len(env.SMTP.Messages()); n != len(failures) {
			t.Errorf("SMTP server got %d messages, want %d", n, len(failures))
		}
	})
}

// A reservation whose holder died holds its key until its lease ends; the
// next request then takes the key over and is sent once.
func TestIdempotency_ExpiredLeaseIsTakenOver(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		body := mail(t, "ivy@example.com", "lease")
		// deadLease is the dead holder's lease: long enough that a loaded
		// machine does not run it out before the first retry, and with the
		// advance well within the delivery's attempt lease (30s).
		const deadLease = 5 * time.Second

		sc := sendScope("lease-1")
		reserve(t, env, sc, body, env.Clock.Now(), deadLease)
		requireError(t, post(t, env, env.AdminKey, sc.Key, body), http.StatusConflict, "idempotency_key_in_use")
		env.Clock.Advance(deadLease + time.Second)
		first := post(t, env, env.AdminKey, sc.Key, body)
		requireOriginal(t, first, http.StatusOK)
		requireReplayOf(t, first, post(t, env, env.AdminKey, sc.Key, body))
		if l := listByKey(t, env, env.AdminKey, sc.Key); len(l) != 1 {
			t.Fatalf("%d sends, want 1", len(l))
		}
		if n := deliverableSends(t, env); n != 1 {
			t.Errorf("%d deliverable sends, want 1", n)
		}
	})
}

// Past the TTL a key is new; the purge removes its row; the sends keep their
// idempotency_key.
func TestIdempotency_KeyExpiresAfterTTL(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{TTL: time.Hour}, func(t *testing.T, env *sendoncetest.Env) {
		body := mail(t, "jack@example.com", "ttl")

		first := post(t, env, env.AdminKey, "ttl-1", body)
		requireOriginal(t, first, http.StatusOK)
		id1 := sendID(t, first)
		// Let delivery finish before moving the clock, so that no attempt's
		// lease runs out under it.
		env.WaitStatus(t, id1, deliveryTimeout, core.StatusSent)
		env.Clock.Advance(59 * time.Minute)
		requireReplayOf(t, first, post(t, env, env.AdminKey, "ttl-1", body))

		env.Clock.Advance(61 * time.Minute)
		second := post(t, env, env.AdminKey, "ttl-1", body)
		requireOriginal(t, second, http.StatusOK)
		id2 := sendID(t, second)
		if id2 == id1 {
			t.Fatalf("after the TTL the same send %s came back", id1)
		}
		env.WaitStatus(t, id2, deliveryTimeout, core.StatusSent)

		ctx := context.Background()
		if n, err := env.Server.Store.PurgeIdempotency(ctx, env.Clock.Now()); err != nil || n != 0 {
			t.Fatalf("purge within the TTL: %d, %v; want 0 purged", n, err)
		}
		if n := idempotencyRows(t, env, "ttl-1"); n != 1 {
			t.Fatalf("%d rows for the key, want 1", n)
		}
		env.Clock.Advance(2 * time.Hour)
		// The periodic purge job may beat this call to it; either way the row
		// must be gone.
		if _, err := env.Server.Store.PurgeIdempotency(ctx, env.Clock.Now()); err != nil {
			t.Fatalf("purge past the TTL: %v", err)
		}
		if n := idempotencyRows(t, env, "ttl-1"); n != 0 {
			t.Fatalf("%d rows for the key after the purge, want 0", n)
		}

		l := listByKey(t, env, env.AdminKey, "ttl-1")
		if len(l) != 2 || l[0]["id"] != id2 || l[1]["id"] != id1 {
			t.Fatalf("sends with the key: %v, want %s and %s", l, id2, id1)
		}
	})
}

// The scope is tenant + method + route (with path parameters): not the API
// key, and not the key alone.
func TestIdempotency_ScopeIsTenantMethodAndRoute(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		body := mail(t, "kate@example.com", "scope")
		first := post(t, env, env.AdminKey, "scope-1", body)
		requireOriginal(t, first, http.StatusOK)
		idA := sendID(t, first)

		t.Run("other tenant", func(t *testing.T) {
			_, keyB := env.NewKey(t, app.NewKeyParams{Name: "tenant b", Tenant: "b", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}})
			rb := post(t, env, keyB, "scope-1", body)
			requireOriginal(t, rb, http.StatusOK)
			idB := sendID(t, rb)
			if idB == idA {
				t.Fatalf("tenant b got tenant a's send %s", idA)
			}
			requireError(t, env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/sends/" + idA, Key: keyB}), http.StatusNotFound, "not_found")
			if l := listByKey(t, env, keyB, "scope-1"); len(l) != 1 || l[0]["id"] != idB {
				t.Fatalf("tenant b lists %v by the key, want only %s", l, idB)
			}
			if l := listByKey(t, env, env.AdminKey, "scope-1"); len(l) != 1 || l[0]["id"] != idA {
				t.Fatalf("tenant a lists %v by the key, want only %s", l, idA)
			}
		})

		t.Run("rotated API key", func(t *testing.T) {
			_, rotated := env.NewKey(t, app.NewKeyParams{Name: "rotated", Scopes: []core.Scope{core.ScopeSend}})
			requireReplayOf(t, first, post(t, env, rotated, "scope-1", body))
		})

		t.Run("other route", func(t *testing.T) {
			mb := mustJSON(t, map[string]any{"id": "scope-mb", "address": "scope@example.com"})
			r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "scope-1", Body: mb})
			requireOriginal(t, r, http.StatusCreated)
			requireReplayOf(t, r, env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "scope-1", Body: mb}))
		})

		t.Run("other path parameter", func(t *testing.T) {
			_, pending := env.NewKey(t, app.NewKeyParams{Name: "needs approval", Scopes: []core.Scope{core.ScopeSend}, RequiresApproval: true})
			var ids []string
			for i := range 2 {
				r := post(t, env, pending, fmt.Sprintf("scope-pending-%d", i), mail(t, "kate@example.com", "pending"))
				requireOriginal(t, r, http.StatusOK)
				if st := r.JSON(t)["status"]; st != string(core.StatusPendingApproval) {
					t.Fatalf("status %v, want pending_approval", st)
				}
				ids = append(ids, sendID(t, r))
			}
			// One Idempotency-Key, two sends: the send id is part of the
			// scope, so the second approval is not a replay of the first.
			for _, id := range ids {
				r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/sends/" + id + "/approve", Key: env.AdminKey, IdemKey: "scope-approve"})
				requireOriginal(t, r, http.StatusOK)
				if got := sendID(t, r); got != id {
					t.Fatalf("approving %s answered for %s", id, got)
				}
			}
		})
	})
}

// The key's syntax: 1 to 255 visible ASCII characters, or a structured-field
// string of them; anything else is 400 idempotency_key_invalid.
func TestIdempotency_KeySyntax(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {

		t.Run("255 characters", func(t *testing.T) {
			key := strings.Repeat("k", 254) + "!"
			r := post(t, env, env.AdminKey, key, mail(t, "leo@example.com", "long key"))
			requireOriginal(t, r, http.StatusOK)
			if l := listByKey(t, env, env.AdminKey, key); len(l) != 1 || l[0]["idempotency_key"] != key {
				t.Fatalf("sends with the key: %v", l)
			}
		})

		t.Run("255 characters quoted", func(t *testing.T) {
			key := strings.Repeat("q", 254) + "!"
			r := doHeader(t, env, []string{`"` + key + `"`}, mail(t, "leo@example.com", "long quoted key"))
			requireOriginal(t, r, http.StatusOK)
			if got := r.JSON(t)["idempotency_key"]; got != key {
				t.Fatalf("idempotency_key %v, want the unquoted key", got)
			}
		})

		invalid := []struct {
			name   string
			values []string
		}{
			{"256 characters", []string{strings.Repeat("k", 256)}},
			{"256 characters quoted", []string{`"` + strings.Repeat("k", 256) + `"`}},
			{"empty", []string{""}},
			{"space", []string{"has space"}},
			{"non-ASCII", []string{"clé-1"}},
			{"twice", []string{"twice-1", "twice-1"}},
			{"empty sf-string", []string{`""`}},
			{"unterminated sf-string", []string{`"abc`}},
		}
		for _, tc := range invalid {
			t.Run(tc.name, func(t *testing.T) {
				before := count(t, env, `SELECT count(*) FROM `+sendoncetest.IdempotencyRecords+` r`)
				r := doHeader(t, env, tc.values, mail(t, "leo@example.com", "invalid key"))
				requireError(t, r, http.StatusBadRequest, "idempotency_key_invalid")
				if p := r.JSON(t)["error"].(map[string]any)["param"]; p != "Idempotency-Key" {
					t.Errorf("param %v, want Idempotency-Key", p)
				}
				if after := count(t, env, `SELECT count(*) FROM `+sendoncetest.IdempotencyRecords+` r`); after != before {
					t.Fatalf("an invalid key was stored")
				}
			})
		}

		t.Run("structured-field string", func(t *testing.T) {
			body := mail(t, "leo@example.com", "sf-string")
			first := doHeader(t, env, []string{"sf-abc"}, body)
			requireOriginal(t, first, http.StatusOK)
			requireReplayOf(t, first, doHeader(t, env, []string{`"sf-abc"`}, body))
			// And the other way round.
			second := doHeader(t, env, []string{`"sf-def"`}, body)
			requireOriginal(t, second, http.StatusOK)
			requireReplayOf(t, second, doHeader(t, env, []string{"sf-def"}, body))
			if l := listByKey(t, env, env.AdminKey, "sf-abc"); len(l) != 1 {
				t.Fatalf("%d sends with key sf-abc, want 1", len(l))
			}
		})

		if n := count(t, env, `SELECT count(*) FROM sends`); n != 4 {
			t.Errorf("%d sends, want 4 (one per valid key)", n)
		}
	})
}

// POST /v1/send without a key: 400 idempotency_key_required, unless the
// requirement is off; then every request is a new send.
func TestIdempotency_MissingKey(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		body := mail(t, "mia@example.com", "no key")

		t.Run("required", func(t *testing.T) {
			t.Parallel()
			env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend})
			r := post(t, env, env.AdminKey, "", body)
			requireError(t, r, http.StatusBadRequest, "idempotency_key_required")
			if n := count(t, env, `SELECT count(*) FROM sends`); n != 0 {
				t.Fatalf("%d sends, want 0", n)
			}
		})

		t.Run("optional", func(t *testing.T) {
			t.Parallel()
			env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, AllowNoKey: true})
			r1 := post(t, env, env.AdminKey, "", body)
			requireOriginal(t, r1, http.StatusOK)
			r2 := post(t, env, env.AdminKey, "", body)
			requireOriginal(t, r2, http.StatusOK)
			if sendID(t, r1) == sendID(t, r2) {
				t.Fatalf("two requests without a key made one send")
			}
			if l := allSends(t, env, env.AdminKey); len(l) != 2 {
				t.Fatalf("%d sends, want 2", len(l))
			}
			if n := count(t, env, `SELECT count(*) FROM `+sendoncetest.IdempotencyRecords+` r`); n != 0 {
				t.Fatalf("%d idempotency rows without a key, want 0", n)
			}
		})
	})
}

// A stored response survives a restart, and replays under the new process's
// own API key of the same tenant.
func TestIdempotency_ReplaysAfterRestart(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		old := sendoncetest.Start(t, sendoncetest.Options{Backend: backend})
		body := mail(t, "nina@example.com", "restart")
		first := post(t, old, old.AdminKey, "restart-1", body)
		requireOriginal(t, first, http.StatusOK)
		old.WaitStatus(t, sendID(t, first), deliveryTimeout, core.StatusSent)
		old.Close()

		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, DB: old.DB})
		requireReplayOf(t, first, post(t, env, env.AdminKey, "restart-1", body))
		if l := listByKey(t, env, env.AdminKey, "restart-1"); len(l) != 1 {
			t.Fatalf("%d sends after the restart, want 1", len(l))
		}
		inbox := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/inbox", Key: env.AdminKey})
		if inbox.Status != http.StatusOK {
			t.Fatalf("inbox: %d %s", inbox.Status, inbox.Body)
		}
		if l := listData(t, inbox); len(l) != 1 {
			t.Fatalf("%d captured messages, want 1", len(l))
		}
	})
}

// The idempotency metrics count first acceptances, replays and both kinds of
// conflict.
func TestIdempotency_Metrics(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		a, b := mail(t, "omar@example.com", "a"), mail(t, "omar@example.com", "b")

		first := post(t, env, env.AdminKey, "m-1", a)
		requireOriginal(t, first, http.StatusOK)                                // accepted
		requireOriginal(t, post(t, env, env.AdminKey, "m-2", b), http.StatusOK) // accepted
		for range 3 {
			requireReplayOf(t, first, post(t, env, env.AdminKey, "m-1", a)) // replays
		}
		requireError(t, post(t, env, env.AdminKey, "m-1", b), http.StatusUnprocessableEntity, "idempotency_key_reused")
		bad := mustJSON(t, map[string]any{"to": "omar@example.com", "text": "no subject"})
		invalid := post(t, env, env.AdminKey, "m-3", bad)
		requireError(t, invalid, http.StatusUnprocessableEntity, "validation_error") // stored, not accepted
		requireReplayOf(t, invalid, post(t, env, env.AdminKey, "m-3", bad))          // a replay
		sc := sendScope("m-4")
		token := reserve(t, env, sc, a, env.Clock.Now(), time.Minute)
		for range 2 {
			requireError(t, post(t, env, env.AdminKey, "m-4", a), http.StatusConflict, "idempotency_key_in_use")
		}
		release(t, env, sc, token)
		requireOriginal(t, post(t, env, env.AdminKey, "m-4", a), http.StatusOK) // accepted

		r := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/metrics"})
		if r.Status != http.StatusOK {
			t.Fatalf("metrics: %d", r.Status)
		}
		for series, want := range map[string]float64{
			`sendonce_sends_accepted_total`:                         3,
			`sendonce_idempotent_replays_total`:                     4,
			`sendonce_idempotency_conflicts_total{reason="in_use"}`: 2,
			`sendonce_idempotency_conflicts_total{reason="reused"}`: 1,
		} {
			if got := metric(t, r.Body, series); got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
		}
	})
}

// metric returns the value of one series in a Prometheus text exposition.
func metric(t testing.TB, exposition []byte, series string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(string(exposition), "\n") {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return v
	}
	t.Fatalf("no series %s in /metrics", series)
	return 0
}

// A replay is answered from the process's cache of completed keys, without
// the database: proven by removing the database's record first. Without
// the cache the same request is new again, which shows the removal counts.
func TestIdempotency_ReplayCacheAnswersWithoutTheDatabase(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		for _, cached := range []bool{true, false} {
			env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, NoReplayCache: !cached, NoWorkers: true})
			body := mail(t, "cora@example.com", "cached")
			first := post(t, env, env.AdminKey, "cache-1", body)
			requireOriginal(t, first, http.StatusOK)
			env.ForgetIdempotencyKey(t, "cache-1")
			again := post(t, env, env.AdminKey, "cache-1", body)
			if cached {
				requireReplayOf(t, first, again)
				requireError(t, post(t, env, env.AdminKey, "cache-1", mail(t, "cora@example.com", "other")),
					http.StatusUnprocessableEntity, "idempotency_key_reused")
				continue
			}
			requireOriginal(t, again, http.StatusOK)
			if l := listByKey(t, env, env.AdminKey, "cache-1"); len(l) != 2 {
				t.Fatalf("without the cache: %d sends, want 2 (the record was gone)", len(l))
			}
		}
	})
}

// Concurrent duplicates in one process never reach the database writer:
// the first runs, the others get 409 (or, once it is done, the replay from
// memory). The writer sees one transaction for the key, not eight.
func TestIdempotency_ConcurrentDuplicatesNeverReachTheWriter(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{Backend: sendoncetest.SQLite, NoWorkers: true})
	commits := func() float64 {
		r := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/metrics"})
		return metric(t, r.Body, "sendonce_db_group_commit_size_sum")
	}
	body := mail(t, "cole@example.com", "coalesced")
	before := commits()
	const n = 8
	// No t.Fatal off the test goroutine: concurrently returns the errors.
	res, failed := concurrently(env, "coalesce-1", body, n)
	for _, err := range failed {
		t.Error(err)
	}
	if len(failed) != 0 {
		t.FailNow()
	}
	originals := 0
	for _, r := range res {
		switch {
		case r.Status == http.StatusConflict:
			requireError(t, r, http.StatusConflict, "idempotency_key_in_use")
		case r.Status != http.StatusOK:
			t.Fatalf("status %d: %s", r.Status, r.Body)
		case r.Header.Get("Idempotent-Replayed") != "true":
			originals++
		}
	}
	if originals != 1 {
		t.Fatalf("%d original answers, want 1", originals)
	}
	if got := commits() - before; got != 1 {
		t.Fatalf("%v write transactions for %d concurrent duplicates, want 1", got, n)
	}
	if l := listByKey(t, env, env.AdminKey, "coalesce-1"); len(l) != 1 {
		t.Fatalf("%d sends, want 1", len(l))
	}
}

// While a first request is still running (here: waiting for the database
// writer, which a transaction holds), a duplicate gets 409
// idempotency_key_in_use with Retry-After: 1 at once, and the same key
// with another body 422; afterwards the duplicate gets the replay. Two
// requests go at once: whichever the server takes first is the first, so
// the test does not guess when it is far enough along.
func TestIdempotency_FirstStillRunningIs409(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{Backend: sendoncetest.SQLite, NoWorkers: true})
	body := mail(t, "dina@example.com", "still running")
	entered, gate := make(chan struct{}), make(chan struct{})
	var opened sync.Once
	release := func() { opened.Do(func() { close(gate) }) }
	defer release() // also when the test fails before it lets the writer go
	held := make(chan error, 1)
	go func() {
		held <- env.Server.Store.InTx(context.Background(), func(core.Tx) error {
			close(entered)
			<-gate
			return nil
		})
	}()
	<-entered
	type answer struct {
		r   *sendoncetest.Response
		err error
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			r, err := env.TryDo(sendoncetest.Request{Method: http.MethodPost, Path: sendPath, Key: env.AdminKey, IdemKey: "running-1", Body: body})
			answers <- answer{r, err}
		}()
	}

	safety := time.AfterFunc(5*time.Second, release) // a broken build waits here
	dup := <-answers
	if dup.err != nil {
		t.Fatal(dup.err)
	}
	if !safety.Stop() {
		t.Fatalf("the duplicate waited for the first (then got %d)", dup.r.Status)
	}
	requireError(t, dup.r, http.StatusConflict, "idempotency_key_in_use")
	if got := dup.r.Header.Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q, want 1", got)
	}
	requireError(t, post(t, env, env.AdminKey, "running-1", mail(t, "dina@example.com", "other")),
		http.StatusUnprocessableEntity, "idempotency_key_reused")

	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	first := <-answers
	if first.err != nil {
		t.Fatal(first.err)
	}
	requireOriginal(t, first.r, http.StatusOK)
	requireReplayOf(t, first.r, post(t, env, env.AdminKey, "running-1", body))
}

// On PostgreSQL a first request running in another transaction (another
// process) holds the key: a duplicate gets 409 at once rather than waiting
// for that transaction.
func TestIdempotency_KeyHeldByAnotherTransactionIs409(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{Backend: sendoncetest.Postgres, NoWorkers: true})
	body := mail(t, "eli@example.com", "held elsewhere")
	sc := sendScope("held-1")
	fp := fingerprint(t, body) // here: no t.Fatal off the test goroutine
	entered, gate := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- env.Server.Store.InTx(context.Background(), func(tx core.Tx) error {
			d, err := tx.DecideIdempotency(context.Background(), sc, fp, env.Clock.Now())
			if err != nil || d.Outcome != idempotency.Proceed {
				t.Errorf("holder's reservation: %v %v", d.Outcome, err)
			}
			close(entered)
			<-gate
			return errors.New("roll back: the holder never completes")
		})
	}()
	<-entered
	safety := time.AfterFunc(5*time.Second, func() { close(gate) }) // a broken build waits here
	dup := post(t, env, env.AdminKey, sc.Key, body)
	if safety.Stop() {
		close(gate)
	}
	<-held
	requireError(t, dup, http.StatusConflict, "idempotency_key_in_use")
	// The holder rolled back: the key is free again.
	requireOriginal(t, post(t, env, env.AdminKey, sc.Key, body), http.StatusOK)
}
