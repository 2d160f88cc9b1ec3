package transport_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/transport"
)

// The Resend transport against a real server that honours Idempotency-Key
// — sendonce's own Resend-compatible POST /emails (held to the official
// Resend Node SDK by internal/httpapi's tests), not our test double. A
// proxy lets the server take the first request and drops its answer: the
// transport asks again with the same key (its own tries) and the server
// answers with the email it holds, so it holds one. Without the key it
// would take the second request as a second email.
// The message carries its own Message-ID, which the server keeps (it is in
// the headers the transport passes on).
func TestResend_LostAnswerAgainstSendonceHoldsOneEmail(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b})
		var posts atomic.Int32
		// The first POST /emails is dropped, key or no key, so that a
		// transport that sent no key is caught too.
		px := faultproxy.Start(t, faultproxy.Options{Upstream: env.URL, Plan: func(r faultproxy.Request) faultproxy.Fault {
			if r.Method == "POST" && r.Path == "/emails" && posts.Add(1) == 1 {
				return faultproxy.Drop
			}
			return faultproxy.Pass
		}})
		r := transport.NewResend(transport.ResendConfig{APIKey: env.AdminKey, Host: strings.TrimPrefix(px.URL, "http://"),
			Insecure: true, RetryWait: 50 * time.Millisecond, Timeout: 5 * time.Second})
		defer r.Close()
		raw := "From: Shop <shop@example.com>\r\nTo: ann@example.net\r\nSubject: Once only\r\nMessage-ID: <snd_01ONCE@example.com>\r\n" +
			"Date: Tue, 01 Dec 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHello.\r\n"
		rec, err := r.Submit(context.Background(), transport.Submission{SendID: "snd_01ONCE", Tenant: "acme",
			Env: transport.Envelope{From: "shop@example.com", To: []string{"ann@example.net"}}, Raw: []byte(raw)})
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		log := px.Log()
		list := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/emails?limit=100", Key: env.AdminKey})
		data, _ := list.JSON(t)["data"].([]any)
		if len(data) != 1 {
			t.Fatalf("the server holds %d emails after %d requests; want 1\n%s", len(data), len(log), list.Body)
		}
		if len(log) != 2 || log[0].Fault != faultproxy.Drop || log[0].Upstream != 200 || log[1].Key != log[0].Key || log[0].Key == "" {
			t.Fatalf("the proxy saw %+v; want the first request taken and its answer dropped, then the same key again", log)
		}
		if id := data[0].(map[string]any)["id"]; id != rec.MessageID {
			t.Errorf("receipt %q, the server's email %v", rec.MessageID, id)
		}
	})
}
