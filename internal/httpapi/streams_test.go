package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// A send's stream: named on POST /v1/send, else its key's default, else
// transactional, on every send route; shown on GET /v1/sends/{id}; a
// stream neither transactional nor bulk is a 422 naming the field; the
// Mailera route refuses one. A request without a stream keeps the
// fingerprint it always had (its replay matches), and the same key with
// a stream added is another request.
func TestSend_Streams(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		bulkKey := a.key(app.NewKeyParams{Name: "newsletter", Scopes: []core.Scope{core.ScopeSend}, DefaultStream: core.StreamBulk})
		mail := func(extra map[string]any) map[string]any {
			m := map[string]any{"to": "ann@example.com", "subject": "s", "text": "x"}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		streamOf := func(id string) any {
			r := a.get(a.AdminKey, "/v1/sends/"+id)
			if r.Status != http.StatusOK {
				t.Fatalf("GET /v1/sends/%s: %d %s", id, r.Status, r.Body)
			}
			return r.JSON(t)["stream"]
		}
		for _, c := range []struct {
			what, key string
			extra     map[string]any
			want      string
		}{
			{"no stream, plain key", a.AdminKey, nil, "transactional"},
			{"bulk named", a.AdminKey, map[string]any{"stream": "bulk"}, "bulk"},
			{"no stream, bulk key", bulkKey, nil, "bulk"},
			{"transactional named, bulk key", bulkKey, map[string]any{"stream": "transactional"}, "transactional"},
		} {
			s := a.sendOK(c.key, mail(c.extra))
			if got := streamOf(s["id"].(string)); got != c.want || s["stream"] != c.want {
				t.Errorf("%s: stream %v (answered %v), want %s", c.what, got, s["stream"], c.want)
			}
		}
		resend := map[string]any{"from": "sender@example.com", "to": "ann@example.com", "subject": "s", "text": "t"}
		for key, want := range map[string]string{a.AdminKey: "transactional", bulkKey: "bulk"} {
			r := a.post(key, "/emails", resend)
			if r.Status != http.StatusOK {
				t.Fatalf("POST /emails: %d %s", r.Status, r.Body)
			}
			if got := streamOf(r.JSON(t)["id"].(string)); got != want {
				t.Errorf("POST /emails: stream %v, want %s (the key's default)", got, want)
			}
		}
		a.wantError("stream urgent", a.post(a.AdminKey, "/v1/send", mail(map[string]any{"stream": "urgent"})), 422, core.CodeValidation, "stream")
		a.wantError("Mailera stream", a.post(a.AdminKey, "/api/public/v1/mailboxes/default/send", mail(map[string]any{"stream": "bulk"})),
			422, core.CodeValidation, "stream")

		first := a.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: a.AdminKey, IdemKey: "reset-1", Body: mail(nil)})
		again := a.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: a.AdminKey, IdemKey: "reset-1", Body: mail(nil)})
		if first.Status != http.StatusOK || again.Status != http.StatusOK || first.JSON(t)["id"] != again.JSON(t)["id"] {
			t.Errorf("a replay without a stream: %d %s, then %d %s; want the same send", first.Status, first.Body, again.Status, again.Body)
		}
		other := a.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: a.AdminKey, IdemKey: "reset-1",
			Body: mail(map[string]any{"stream": "transactional"})})
		a.wantError("the same key with a stream given", other, 422, "idempotency_key_reused", "Idempotency-Key")
	})
}
