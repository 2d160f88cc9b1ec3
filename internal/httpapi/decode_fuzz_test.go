package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	netmail "net/mail"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// FuzzSendRequest posts arbitrary bodies to POST /v1/send through the real
// handler (auth, idempotency layer, decoder, validation, acceptance in
// SQLite) and checks the contract's promises about any input:
//
//   - never a 5xx: whatever a client sends is its own mistake or a send;
//   - every refusal has the error shape {"error":{"code","message"}} with a
//     non-empty code that matches the status;
//   - every 200 is a queued send object, and what was stored renders into a
//     message whose header section the caller could not extend: one From,
//     one Message-ID, no Bcc, and nothing but the caller's own extra headers.
//
// The seed corpus (f.Add and testdata/fuzz/FuzzSendRequest) runs with every
// go test; go test -fuzz=FuzzSendRequest explores further.
func FuzzSendRequest(f *testing.F) {
	env := sendoncetest.Start(f, sendoncetest.Options{AllowNoKey: true, NoWorkers: true})
	put := env.Do(f, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/t1", Key: env.AdminKey,
		Body: map[string]string{"subject": "Hi {{.name}}", "text": "Hello {{.name}}", "html": "<p>{{.name}}</p>"}})
	if put.Status != http.StatusCreated {
		f.Fatalf("PUT template: %d %s", put.Status, put.Body)
	}
	for _, seed := range []string{
		`{"to":"ann@example.com","subject":"Hi","text":"Hello"}`,
		`{"to":["Ann <ann@example.com>","bob@example.com"],"cc":"c@example.com","bcc":["d@example.com"],"reply_to":"r@example.com","subject":"Grüße ✓","text":"t","html":"<p>h</p>","headers":{"X-Campaign":"spring","List-Unsubscribe":"<mailto:u@example.com>"},"tags":{"k":"v"}}`,
		`{"to":"ann@example.com","template_id":"t1","variables":{"name":"<b>Ann</b>"}}`,
		`{"to":"ann@example.com","template_id":"t1","variables":{"name":"x\r\nBcc: v@example.com"}}`,
		`{"to":"ann@example.com","template_id":"t1"}`,
		`{"to":"ann@example.com","subject":"=?utf-8?q?encoded?=","html":"<p>only html</p>"}`,
		`{"to":"\"Ann, Jr.\" <ann@example.com>","from":"Me <sender@example.com>","subject":" padded ","text":"t"}`,
		`{"to":"ann@example.com","subject":"Hi\r\nBcc: victim@example.com","text":"t"}`,
		`{"to":"ann@example.com\r\nBcc: victim@example.com","subject":"s","text":"t"}`,
		`{"to":"ann@example.com","subject":"s","text":"t","headers":{"Bcc":"victim@example.com"}}`,
		`{"to":"ann@example.com","subject":"s","text":"t","headers":{"X-A":"b\nBcc: v@example.com"}}`,
		`{"to":"ann@example.com","subject":"s","text":"t","headers":{"X-A\r\nBcc":"v@example.com"}}`,
		`{"to":5,"subject":[],"text":{}}`,
		`{"to":[5]}`,
		`{"to":"ann@example.com","subject":"s","text":"t","suject":"typo"}`,
		`{"to":"ann@example.com","subject":"s","text":"t","html":"<img src=\"cid:a\">","attachments":[{"filename":"a.png","content":"iVBORw0KGgo=","content_id":"a"},{"filename":"résumé.pdf","content":"JVBERi0=","content_type":"application/pdf"}]}`,
		`{"to":"ann@example.com","subject":"s","text":"t","attachments":[{"filename":"a\r\nBcc: v@example.com","content":"eA=="}]}`,
		`{"to":"ann@example.com","subject":"s","text":"t","attachments":[{"filename":"a.txt","content":"eA==","content_type":"text/plain\r\nBcc: v@example.com"}]}`,
		`{"to":"ann@example.com","subject":"s","text":"t","attachments":[{"filename":"a.txt","content":"!!"}]}`,
		`{"to":"ann@example.com","subject":"s","text":"t","attachments":[{"filename":"a","content":"eA==","content_id":"x>\r\nBcc: v@example.com"}]}`,
		`{"to":"ann@example.com","subject":"s","text":"t","attachments":{}}`,
		`{"to":"ann@example.com","subject":"s","text":"t","scheduled_at":"2099-01-01T00:00:00Z"}`,
		`{"to":"ann@example.com","to":"bob@example.com"}`,
		`{"to":"ann@example.com","subject":"s","text":"t","tags":{"a":1e400}}`,
		`{"to":"ann@example.com","subject":"s","text":"t","variables":{"n":9007199254740993}}`,
		`[{"to":"ann@example.com"}]`,
		`"just a string"`,
		`null`,
		`{}`,
		`{`,
		``,
		"{\"to\":\"ann@example.com\",\"subject\":\"\xff\",\"text\":\"t\"}",
		`{"to":"ann@example.com","subject":"s","text":"t"} {}`,
		strings.Repeat("[", 100) + strings.Repeat("]", 100),
		`{"to":"ann@example.com","subject":"s","text":"t","mailbox_id":"nope"}`,
		`{"to":"ann@example.com","subject":"s","text":"t","template_id":"t1"}`,
	} {
		f.Add([]byte(seed))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/v1/send", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+env.AdminKey)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		env.Server.Handler.ServeHTTP(rec, req)
		status, out := rec.Code, rec.Body.Bytes()

		if status >= 500 {
			t.Fatalf("status %d for body %q: %s", status, body, out)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("status %d with Content-Type %q", status, ct)
		}
		if status != http.StatusOK {
			fuzzCheckError(t, status, out)
			return
		}
		fuzzCheckSend(t, env, out)
	})
}

// fuzzCheckError checks a refusal's shape and that its code fits its status.
func fuzzCheckError(t *testing.T, status int, out []byte) {
	t.Helper()
	var e struct {
		Error *struct {
			Code    string  `json:"code"`
			Message *string `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out, &e); err != nil || e.Error == nil || e.Error.Code == "" || e.Error.Message == nil {
		t.Fatalf("status %d body %q is not the error shape", status, out)
	}
	want := map[int][]string{
		http.StatusBadRequest:            {core.CodeInvalidJSON},
		http.StatusRequestEntityTooLarge: {"payload_too_large"},
		http.StatusUnprocessableEntity:   {core.CodeValidation, core.CodeTemplateMissingVar},
	}[status]
	for _, c := range want {
		if e.Error.Code == c {
			return
		}
	}
	t.Fatalf("status %d with code %q: want one of %v", status, e.Error.Code, want)
}

// fuzzCheckSend checks an accepted send: the response is a send object, and
// the stored send renders into a message with exactly the headers it should.
func fuzzCheckSend(t *testing.T, env *sendoncetest.Env, out []byte) {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("200 body is not a JSON object: %v: %s", err, out)
	}
	id, _ := v["id"].(string)
	if v["object"] != "send" || (v["status"] != string(core.StatusQueued) && v["status"] != string(core.StatusScheduled)) || !strings.HasPrefix(id, "snd_") {
		t.Fatalf("200 body is not a queued or scheduled send object: %s", out)
	}
	s, err := env.Server.Store.Send(context.Background(), "default", id)
	if err != nil {
		t.Fatalf("accepted send %s is not stored: %v", id, err)
	}
	for _, f := range append(append(append(append([]string{s.From, s.Subject}, s.To...), s.Cc...), s.Bcc...), s.ReplyTo...) {
		if strings.ContainsAny(f, "\r\n") {
			t.Fatalf("accepted send %s has a line break in a header field: %q", id, f)
		}
	}
	if s.Attachments, err = env.Server.Store.SendAttachments(context.Background(), id); err != nil || len(s.Attachments) != s.AttachmentCount {
		t.Fatalf("accepted send %s: %d of %d attachments stored (%v)", id, len(s.Attachments), s.AttachmentCount, err)
	}
	raw, envl, err := render.Message(s)
	if err != nil {
		t.Fatalf("accepted send %s does not render: %v", id, err)
	}
	if len(envl.To) != len(s.To)+len(s.Cc)+len(s.Bcc) {
		t.Fatalf("envelope has %d recipients for %d+%d+%d", len(envl.To), len(s.To), len(s.Cc), len(s.Bcc))
	}
	m, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("rendered message does not parse: %v\n%s", err, raw)
	}
	extra := map[string]int{} // the caller's headers; "X-A" and "x-a" are two of one name
	for _, h := range s.Headers {
		extra[http.CanonicalHeaderKey(h.Name)]++
	}
	for name, vals := range m.Header {
		switch name {
		case "Date", "Message-Id", "From", "To", "Cc", "Reply-To", "Subject", "Mime-Version", "Content-Type", "Content-Transfer-Encoding":
			if len(vals) != 1 {
				t.Fatalf("rendered message has %d %s headers:\n%s", len(vals), name, raw)
			}
		default:
			if extra[name] == 0 || len(vals) != extra[name] {
				t.Fatalf("rendered message has header %s the caller did not give (or twice):\n%s", name, raw)
			}
		}
	}
	if got := m.Header.Get("Message-Id"); got != s.MessageID {
		t.Fatalf("rendered Message-ID %q, send's %q", got, s.MessageID)
	}
}
