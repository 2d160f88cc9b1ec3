package httpapi_test

// These tests prove docs/compatibility.md with real clients: the
// official Resend Go SDK against the Resend-compatible routes, and the
// Mailera-style routes against recording SMTP relays.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	gomessage "github.com/emersion/go-message"
	resend "github.com/resend/resend-go/v3"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

func resendClient(t *testing.T, env *sendoncetest.Env) (*resend.Client, *lastAnswer) {
	t.Helper()
	last := &lastAnswer{}
	c := resend.NewCustomClient(&http.Client{Transport: last, Timeout: 30 * time.Second}, env.AdminKey)
	u, err := url.Parse(env.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = u
	return c, last
}

// lastAnswer is the SDK's transport; it keeps the status and error name of
// the last answer. The SDK's errors carry only the message, so without it
// a test of an error could not tell a 409 from a 500.
type lastAnswer struct {
	mu     sync.Mutex
	status int
	name   string
}

func (l *lastAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var e struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(body, &e)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status, l.name = resp.StatusCode, e.Name
	return resp, nil
}

// requireAnswer fails the test unless err is the SDK's error for the last
// answer, status with Resend's error name.
func (l *lastAnswer) requireAnswer(t *testing.T, what string, err error, status int, name string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil || l.status != status || l.name != name {
		t.Fatalf("%s: error %v after %d %q; want %d %s", what, err, l.status, l.name, status, name)
	}
}

func TestCompat_ResendSDK(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b})
		c, last := resendClient(t, env)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()

		// Send, then get.
		sent, err := c.Emails.SendWithContext(ctx, &resend.SendEmailRequest{
			From: "Acme <sender@example.com>", To: []string{"ada@example.com"}, Subject: "Hello", Text: "Hi Ada",
			Html: "<p>Hi Ada</p>", Cc: []string{"cc@example.com"}, ReplyTo: "reply@example.com",
			Tags: []resend.Tag{{Name: "campaign", Value: "welcome"}}, Headers: map[string]string{"X-Entity-Ref-ID": "42"},
		})
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		got, err := c.Emails.GetWithContext(ctx, sent.Id)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.Id != sent.Id || got.Object != "email" || got.Subject != "Hello" || got.From != `"Acme" <sender@example.com>` ||
			len(got.To) != 1 || got.To[0] != "ada@example.com" || got.Text != "Hi Ada" || len(got.ReplyTo) != 1 || got.LastEvent == "" {
			t.Fatalf("get returned %+v", got)
		}
		env.WaitStatus(t, sent.Id, 15*time.Second, core.StatusSent)

		// The same idempotency key twice: one send, the same id.
		req := &resend.SendEmailRequest{From: "sender@example.com", To: []string{"bob@example.com"}, Subject: "Once", Text: "once"}
		opts := &resend.SendEmailOptions{IdempotencyKey: "resend-once-1"}
		first, err := c.Emails.SendWithOptions(ctx, req, opts)
		if err != nil {
			t.Fatalf("send with key: %v", err)
		}
		second, err := c.Emails.SendWithOptions(ctx, req, opts)
		if err != nil {
			t.Fatalf("send with key again: %v", err)
		}
		if first.Id != second.Id {
			t.Fatalf("same key gave two sends: %s and %s", first.Id, second.Id)
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM sends WHERE idempotency_key = ?`, "resend-once-1"); n != 1 {
			t.Fatalf("%d sends for one key, want 1", n)
		}
		// The same key with another payload is Resend's 409.
		req.Subject = "Other"
		_, err = c.Emails.SendWithOptions(ctx, req, opts)
		last.requireAnswer(t, "reused key with another payload", err, http.StatusConflict, "invalid_idempotent_request")

		// A batch under one key: all accepted, and replayed whole.
		batch := []*resend.SendEmailRequest{
			{From: "sender@example.com", To: []string{"b1@example.com"}, Subject: "B1", Text: "1"},
			{From: "sender@example.com", To: []string{"b2@example.com"}, Subject: "B2", Html: "<b>2</b>"},
			{From: "sender@example.com", To: []string{"b3@example.com"}, Subject: "B3", Text: "3"},
		}
		bopts := &resend.BatchSendEmailOptions{IdempotencyKey: "resend-batch-1"}
		br, err := c.Batch.SendWithOptions(ctx, batch, bopts)
		if err != nil {
			t.Fatalf("batch: %v", err)
		}
		if len(br.Data) != 3 {
			t.Fatalf("batch returned %d ids, want 3", len(br.Data))
		}
		again, err := c.Batch.SendWithOptions(ctx, batch, bopts)
		if err != nil {
			t.Fatalf("batch again: %v", err)
		}
		for i := range br.Data {
			if again.Data[i].Id != br.Data[i].Id {
				t.Fatalf("batch replay gave other ids: %v vs %v", again.Data, br.Data)
			}
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM sends WHERE idempotency_key = ?`, "resend-batch-1"); n != 3 {
			t.Fatalf("%d sends for the batch key, want 3", n)
		}
		for _, d := range br.Data {
			env.WaitStatus(t, d.Id, 15*time.Second, core.StatusSent)
		}
		// A batch with one bad email accepts none.
		bad := []*resend.SendEmailRequest{batch[0], {From: "sender@example.com", To: []string{"not an address"}, Subject: "x", Text: "x"}}
		_, err = c.Batch.SendWithContext(ctx, bad)
		last.requireAnswer(t, "bad batch", err, http.StatusUnprocessableEntity, "validation_error")
		if !strings.Contains(err.Error(), "email 1") {
			t.Fatalf("bad batch: %v, want an error naming email 1", err)
		}
		_, err = c.Emails.GetWithContext(ctx, "snd_nope")
		last.requireAnswer(t, "get of a missing email", err, http.StatusNotFound, "not_found")
	})
}

func TestCompat_ResendErrors(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	mail := map[string]any{"from": "sender@example.com", "to": "a@example.com", "subject": "s", "text": "t"}
	for _, tt := range []struct {
		name       string
		req        sendoncetest.Request
		status     int
		errName    string
		retryAfter bool
	}{
		{"key of 257 chars", sendoncetest.Request{IdemKey: strings.Repeat("k", 257), Body: mail}, 400, "invalid_idempotency_key", false},
		{"scheduled_at", sendoncetest.Request{Body: map[string]any{"from": "sender@example.com", "to": "a@example.com", "subject": "s", "text": "t", "scheduled_at": "in 1 min"}}, 422, "validation_error", false},
		{"attachment not base64", sendoncetest.Request{Body: map[string]any{"from": "sender@example.com", "to": "a@example.com", "subject": "s", "text": "t", "attachments": []any{map[string]any{"filename": "a.txt", "content": "e!A=="}}}}, 422, "validation_error", false},
		{"no from", sendoncetest.Request{Body: map[string]any{"to": "a@example.com", "subject": "s", "text": "t"}}, 422, "validation_error", false},
		{"one header twice, in two cases", sendoncetest.Request{Body: map[string]any{"from": "sender@example.com", "to": "a@example.com", "subject": "s", "text": "t", "headers": map[string]string{"X-A": "1", "x-a": "2"}}}, 422, "validation_error", false},
		{"Message-ID twice, in two cases", sendoncetest.Request{Body: map[string]any{"from": "sender@example.com", "to": "a@example.com", "subject": "s", "text": "t", "headers": map[string]string{"Message-ID": "<a@example.com>", "message-id": "<b@example.com>"}}}, 422, "validation_error", false},
		{"no key", sendoncetest.Request{Body: mail, Key: "-"}, 401, "missing_api_key", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.req
			r.Method, r.Path = "POST", "/emails"
			switch r.Key {
			case "":
				r.Key = env.AdminKey
			case "-":
				r.Key = ""
			}
			resp := env.Do(t, r)
			body := resp.JSON(t)
			if resp.Status != tt.status || body["name"] != tt.errName || body["statusCode"] != float64(tt.status) || body["message"] == "" {
				t.Fatalf("got %d %s, want %d %s", resp.Status, resp.Body, tt.status, tt.errName)
			}
		})
	}
	// A 256-character key is Resend's limit and is accepted; the same key
	// with another body is 409 invalid_idempotent_request.
	key := strings.Repeat("k", 256)
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/emails", Key: env.AdminKey, IdemKey: key, Body: mail}); r.Status != 200 {
		t.Fatalf("256-char key: %d %s", r.Status, r.Body)
	}
	other := map[string]any{"from": "sender@example.com", "to": "b@example.com", "subject": "s", "text": "t"}
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/emails", Key: env.AdminKey, IdemKey: key, Body: other})
	if r.Status != 409 || r.JSON(t)["name"] != "invalid_idempotent_request" {
		t.Fatalf("reused key: %d %s", r.Status, r.Body)
	}
}

// mimeParts returns the leaf parts of a message as content type → body.
func mimeParts(t *testing.T, raw []byte) (*gomessage.Entity, map[string][]byte) {
	t.Helper()
	e, err := gomessage.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parse message: %v", err)
	}
	out := map[string][]byte{}
	var walk func(e *gomessage.Entity)
	walk = func(e *gomessage.Entity) {
		if mr := e.MultipartReader(); mr != nil {
			for {
				p, err := mr.NextPart()
				if errors.Is(err, io.EOF) {
					return
				}
				if err != nil {
					t.Fatalf("read part: %v", err)
				}
				walk(p)
			}
		}
		mt, _, _ := e.Header.ContentType()
		b, _ := io.ReadAll(e.Body)
		out[mt] = b
	}
	walk(e)
	return e, out
}

func waitMessage(t *testing.T, srv *smtptest.Server, messageID string) smtptest.Message {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range srv.Messages() {
			if "<"+m.MessageID+">" == messageID {
				return m
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("message %s never reached the relay", messageID)
	return smtptest.Message{}
}

func TestCompat_MaileraRoutes(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		// The relays first: cleanups run last-first, and the server must
		// have ended its pooled sessions to them before they check that no
		// client is left.
		good := smtptest.Start(t, smtptest.Options{Username: "sales", Password: "right-pass"})
		bad := smtptest.Start(t, smtptest.Options{Username: "sales", Password: "other-pass"})
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true, AllowNoKey: true})
		do := func(method, path, idem string, body any) *sendoncetest.Response {
			return env.Do(t, sendoncetest.Request{Method: method, Path: path, Key: env.AdminKey, IdemKey: idem, Body: body})
		}
		env.OwnDomain(t, "default", "example.com")
		for _, mb := range []map[string]any{
			{"id": "sales", "address": "sales@example.com", "name": "Sales Team", "transport": "smtp://sales:right-pass@" + good.Addr + "?tls=none"},
			{"id": "broken", "address": "broken@example.com", "transport": "smtp://sales:right-pass@" + bad.Addr + "?tls=none"},
			{"id": "inbound", "address": "inbound@example.com", "receive_only": true},
		} {
			if r := do("POST", "/v1/mailboxes", "", mb); r.Status != 201 {
				t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
			}
		}
		if r := do("GET", "/v1/mailboxes/sales", "", nil); strings.Contains(string(r.Body), "right-pass") {
			t.Fatalf("mailbox shows its password: %s", r.Body)
		}

		// send: from the mailbox's identity, through the mailbox's relay.
		r := do("POST", "/api/public/v1/mailboxes/sales/send", "mb-send-1", map[string]any{"to": "ada@example.com", "subject": "Hello", "text": "Hi"})
		if r.Status != 200 {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		orig := r.JSON(t)
		if orig["mailbox_id"] != "sales" || orig["from"] != `"Sales Team" <sales@example.com>` {
			t.Fatalf("send object %s", r.Body)
		}
		replay := do("POST", "/api/public/v1/mailboxes/sales/send", "mb-send-1", map[string]any{"to": "ada@example.com", "subject": "Hello", "text": "Hi"})
		if replay.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(replay.Body, r.Body) {
			t.Fatalf("replay: %d %s", replay.Status, replay.Body)
		}
		msg := waitMessage(t, good, orig["message_id"].(string))
		if msg.Auth != "sales" {
			t.Fatalf("relayed with auth %q, want the mailbox's credentials", msg.Auth)
		}
		if g := do("GET", "/api/public/v1/sends/"+orig["id"].(string), "", nil); g.Status != 200 || g.JSON(t)["id"] != orig["id"] {
			t.Fatalf("get send: %d %s", g.Status, g.Body)
		}

		// relayed sends body from sales (what names it in a failure) and
		// is the message the relay got for it.
		relayed := func(what, idem string, body map[string]any) smtptest.Message {
			r := do("POST", "/api/public/v1/mailboxes/sales/send", idem, body)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", what, r.Status, r.Body)
			}
			return waitMessage(t, good, r.JSON(t)["message_id"].(string))
		}

		// reply: In-Reply-To, References and one "Re: ".
		reply := relayed("reply", "mb-reply-1", map[string]any{
			"mode": "reply", "in_reply_to": "<parent@example.org>", "references": []string{"<root@example.org>"},
			"to": "ada@example.com", "subject": "Re: Question", "text": "Answer"})
		e, _ := mimeParts(t, reply.Data)
		if got := e.Header.Get("In-Reply-To"); got != "<parent@example.org>" {
			t.Fatalf("In-Reply-To %q", got)
		}
		if got := e.Header.Get("References"); got != "<root@example.org> <parent@example.org>" {
			t.Fatalf("References %q", got)
		}
		if got := e.Header.Get("Subject"); got != "Re: Question" {
			t.Fatalf("Subject %q, want one Re:", got)
		}
		if r := do("POST", "/api/public/v1/mailboxes/sales/send", "", map[string]any{"mode": "reply", "to": "a@example.com", "subject": "x", "text": "x"}); r.Status != 422 || r.ErrorCode() != "validation_error" {
			t.Fatalf("reply without in_reply_to: %d %s", r.Status, r.Body)
		}

		// forward: the first send, attached whole.
		fwd := relayed("forward", "mb-fwd-1", map[string]any{
			"mode": "forward", "original_id": orig["id"], "to": "boss@example.com", "text": "FYI"})
		e, parts := mimeParts(t, fwd.Data)
		if got := e.Header.Get("Subject"); got != "Fwd: Hello" {
			t.Fatalf("forward Subject %q", got)
		}
		att, ok := parts["message/rfc822"]
		if !ok {
			t.Fatalf("no message/rfc822 part in %q", fwd.Data)
		}
		inner, err := gomessage.Read(bytes.NewReader(att))
		if err != nil {
			t.Fatal(err)
		}
		if inner.Header.Get("Message-Id") != orig["message_id"] || inner.Header.Get("Subject") != "Hello" {
			t.Fatalf("attached message headers %v", inner.Header)
		}

		// receive-only: refused with a clear 4xx.
		if r := do("POST", "/api/public/v1/mailboxes/inbound/send", "", map[string]any{"to": "a@example.com", "subject": "x", "text": "x"}); r.Status != 422 || !strings.Contains(string(r.Body), "receive-only") {
			t.Fatalf("receive-only: %d %s", r.Status, r.Body)
		}

		// status: a relay that takes the login, one that refuses it.
		st := do("GET", "/api/public/v1/mailboxes/sales/status", "", nil).JSON(t)
		if st["mailbox_id"] != "sales" || st["can_send"] != true || st["error"] != nil || st["checked_at"] == "" {
			t.Fatalf("status of sales: %v", st)
		}
		st = do("GET", "/api/public/v1/mailboxes/broken/status", "", nil).JSON(t)
		if st["can_send"] != false || !strings.Contains(st["error"].(string), "535") || strings.Contains(st["error"].(string), "right-pass") {
			t.Fatalf("status of broken: %v", st)
		}
		again := do("GET", "/api/public/v1/mailboxes/broken/status", "", nil).JSON(t)
		if again["checked_at"] != st["checked_at"] {
			t.Fatalf("status was checked again within the cache time: %v then %v", st["checked_at"], again["checked_at"])
		}
		env.Clock.Advance(6 * time.Second)
		if later := do("GET", "/api/public/v1/mailboxes/broken/status", "", nil).JSON(t); later["checked_at"] == st["checked_at"] {
			t.Fatal("status was not checked again after the cache time")
		}
		if st := do("GET", "/api/public/v1/mailboxes/inbound/status", "", nil).JSON(t); st["can_send"] != false {
			t.Fatalf("status of a receive-only mailbox: %v", st)
		}
		if r := do("GET", "/api/public/v1/mailboxes/nope/status", "", nil); r.Status != http.StatusNotFound {
			t.Fatalf("status of a missing mailbox: %d %s", r.Status, r.Body)
		}
	})
}
