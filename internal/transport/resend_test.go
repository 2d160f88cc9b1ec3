package transport

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/mail"
	"strings"
	"testing"
	"time"

	resend "github.com/resend/resend-go/v3"

	"github.com/sendonce/sendonce/internal/message"
	"github.com/sendonce/sendonce/internal/testkit/resendtest"
)

const testResendKey = "re_test_0123456789"

// renderTestMessage is a message as delivery hands it over: rendered by
// internal/message, with a DKIM-Signature line in front that changes on
// every attempt.
func renderTestMessage(t *testing.T, sig string) []byte {
	t.Helper()
	raw, err := message.BuildWithAttachments(&message.Message{
		From:      mail.Address{Name: "Shop", Address: "shop@example.com"},
		To:        []mail.Address{{Address: "ann@example.net"}, {Address: "gone@example.net"}},
		Cc:        []mail.Address{{Name: "Bob", Address: "bob@example.net"}},
		ReplyTo:   []mail.Address{{Address: "help@example.com"}},
		Subject:   "Your order ✓",
		Text:      "Thanks for your order.",
		HTML:      "<p>Thanks for your <b>order</b>.</p><img src=\"cid:logo\">",
		MessageID: "<snd_01TEST@example.com>",
		Date:      time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Headers:   []message.Header{{Name: "X-Campaign", Value: "spring"}},
	}, []message.Attachment{
		{Filename: "invoice.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.4 test")},
		{Filename: "logo.png", ContentType: "image/png", ContentID: "logo", Data: []byte("\x89PNG")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("DKIM-Signature: v=1; a=rsa-sha256; t="+sig+"; b=xyz\r\n"), raw...)
}

func testSubmission(t *testing.T, sig string) Submission {
	return Submission{SendID: "snd_01TEST", Tenant: "acme corp",
		Env: Envelope{From: "bounce@example.com", To: []string{"ann@example.net", "bob@example.net", "hidden@example.org"}},
		Raw: renderTestMessage(t, sig)}
}

func newTestResend(srv *resendtest.Server) *Resend {
	return NewResend(ResendConfig{APIKey: testResendKey, Host: srv.Host, Insecure: true, RetryWait: 10 * time.Millisecond, Timeout: 2 * time.Second})
}

func TestResend_SubmitsTheRenderedMessage(t *testing.T) {
	srv := resendtest.Start(t, testResendKey)
	r := newTestResend(srv)
	rec, err := r.Submit(context.Background(), testSubmission(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	emails := srv.Emails()
	if len(emails) != 1 || rec.MessageID != emails[0].ID || rec.Provider != "resend" {
		t.Fatalf("receipt %+v, emails %d", rec, len(emails))
	}
	reqs := srv.Requests()
	if reqs[0].IdempotencyKey != "sendonce-snd_01TEST" || reqs[0].Authorization != "Bearer "+testResendKey {
		t.Errorf("key %q, auth %q", reqs[0].IdempotencyKey, reqs[0].Authorization)
	}
	// The official Go SDK's request type reads our body: the field names
	// are Resend's.
	var req resend.SendEmailRequest
	if err := json.Unmarshal(emails[0].Raw, &req); err != nil {
		t.Fatal(err)
	}
	if req.From != `"Shop" <shop@example.com>` || strings.Join(req.To, ",") != "<ann@example.net>" ||
		strings.Join(req.Cc, ",") != `"Bob" <bob@example.net>` || strings.Join(req.Bcc, ",") != "hidden@example.org" {
		t.Errorf("addresses: from %q to %q cc %q bcc %q", req.From, req.To, req.Cc, req.Bcc)
	}
	if req.Subject != "Your order ✓" || req.Text != "Thanks for your order." || !strings.Contains(req.Html, "<b>order</b>") {
		t.Errorf("subject %q text %q html %q", req.Subject, req.Text, req.Html)
	}
	if !strings.Contains(req.ReplyTo, "help@example.com") {
		t.Errorf("reply_to %q", req.ReplyTo)
	}
	if req.Headers["Message-Id"] != "<snd_01TEST@example.com>" || req.Headers["X-Campaign"] != "spring" {
		t.Errorf("headers %v", req.Headers)
	}
	for name := range req.Headers {
		if l := strings.ToLower(name); l == "dkim-signature" || l == "date" || strings.HasPrefix(l, "content-") {
			t.Errorf("header %s passed on: Resend writes it", name)
		}
	}
	// Attachments as Resend documents them (the SDK's own type has no
	// JSON tags to read them back with): base64 content, content_type,
	// content_id for an inline one.
	var wire struct {
		Attachments []struct {
			Filename, Content, ContentType, ContentID string
		}
	}
	_ = json.Unmarshal([]byte(strings.NewReplacer("content_type", "contenttype", "content_id", "contentid").Replace(string(emails[0].Raw))), &wire)
	atts := map[string]string{}
	for _, a := range wire.Attachments {
		atts[a.Filename] = a.Content + " " + a.ContentType + " " + a.ContentID
	}
	if len(atts) != 2 || atts["invoice.pdf"] != "JVBERi0xLjQgdGVzdA== application/pdf " || atts["logo.png"] != "iVBORw== image/png logo" {
		t.Errorf("attachments %q", atts)
	}
	tags := map[string]string{}
	for _, tg := range req.Tags {
		tags[tg.Name] = tg.Value
	}
	if tags["sendonce_send_id"] != "snd_01TEST" || tags["sendonce_tenant"] != "acme_corp" {
		t.Errorf("tags %v", tags)
	}
}

// firstOnly is a plan that meets the first request with f and lets the
// others pass.
func firstOnly(f resendtest.Fault) func(n int) resendtest.Fault {
	return func(n int) resendtest.Fault {
		if n == 1 {
			return f
		}
		return resendtest.Pass
	}
}

// Every attempt of a send posts the same body under the same key, though
// the DKIM signature (its t=) differs: Resend answers a repeated key with
// the first email only when the payload is the same.
func TestResend_SamePayloadEveryAttempt(t *testing.T) {
	a, err := resendPayload(testSubmission(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := resendPayload(testSubmission(t, "2"))
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("payloads differ:\n%s\n%s", a, b)
	}
}

// The answer is lost after Resend processed the request: the transport
// asks again with the same key, Resend answers the first email, and there
// is one email.
func TestResend_LostAnswerRetriedWithTheSameKey(t *testing.T) {
	srv := resendtest.Start(t, testResendKey)
	srv.SetPlan(firstOnly(resendtest.Drop))
	rec, err := newTestResend(srv).Submit(context.Background(), testSubmission(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	reqs, emails := srv.Requests(), srv.Emails()
	if len(reqs) != 2 || len(emails) != 1 || rec.MessageID != emails[0].ID {
		t.Fatalf("%d requests, %d emails, receipt %+v", len(reqs), len(emails), rec)
	}
	if reqs[0].IdempotencyKey != reqs[1].IdempotencyKey || string(reqs[0].Body) != string(reqs[1].Body) {
		t.Errorf("the retry is not the same request: keys %q %q", reqs[0].IdempotencyKey, reqs[1].IdempotencyKey)
	}
	// A later attempt (a new Submit, new DKIM signature) is answered the
	// same email too.
	rec2, err := newTestResend(srv).Submit(context.Background(), testSubmission(t, "2"))
	if err != nil || rec2.MessageID != rec.MessageID || len(srv.Emails()) != 1 {
		t.Fatalf("second attempt: %+v %v, %d emails", rec2, err, len(srv.Emails()))
	}
}

// Every answer lost: the attempt ends Temporary and MaybeAccepted (retry
// on Resend only, never another transport), one email held.
func TestResend_AnswerAlwaysLost(t *testing.T) {
	for _, f := range []resendtest.Fault{resendtest.Drop, resendtest.Hang, resendtest.ServerError} {
		t.Run(f.String(), func(t *testing.T) {
			srv := resendtest.Start(t, testResendKey)
			srv.SetPlan(func(int) resendtest.Fault { return f })
			r := NewResend(ResendConfig{APIKey: testResendKey, Host: srv.Host, Insecure: true, Tries: 2,
				RetryWait: 10 * time.Millisecond, Timeout: 300 * time.Millisecond})
			_, err := r.Submit(context.Background(), testSubmission(t, "1"))
			var e *Error
			if !errors.As(err, &e) || e.Class != Temporary || !e.MaybeAccepted || Definite(err) {
				t.Fatalf("err = %#v; want Temporary, MaybeAccepted", err)
			}
			want := 1
			if f == resendtest.ServerError {
				want = 0
			}
			if n := len(srv.Emails()); n != want || len(srv.Requests()) != 2 {
				t.Errorf("%d emails, %d requests", n, len(srv.Requests()))
			}
		})
	}
}

func TestResend_Classification(t *testing.T) {
	srv := resendtest.Start(t, testResendKey)
	srv.SetPlan(func(int) resendtest.Fault { return resendtest.TooMany })
	_, err := newTestResend(srv).Submit(context.Background(), testSubmission(t, "1"))
	var e *Error
	if !errors.As(err, &e) || e.Class != Temporary || !Definite(err) || e.Code != 429 || e.RetryAfter != time.Second {
		t.Errorf("429: %#v", err)
	}
	srv.SetPlan(nil)
	// A wrong key is the account's problem: not taken, definite.
	bad := NewResend(ResendConfig{APIKey: "re_wrong", Host: srv.Host, Insecure: true})
	if _, err := bad.Submit(context.Background(), testSubmission(t, "1")); !Definite(err) || ClassOf(err) != Temporary {
		t.Errorf("bad key: %v", err)
	}
	// The key used before with another payload: Resend holds an email
	// for it that is not this one: ambiguous.
	if _, err := newTestResend(srv).Submit(context.Background(), testSubmission(t, "1")); err != nil {
		t.Fatal(err)
	}
	other := testSubmission(t, "1")
	other.Raw = []byte(strings.Replace(string(other.Raw), "Thanks for your order.", "Thanks for your ORDER.", 1))
	if _, err := newTestResend(srv).Submit(context.Background(), other); ClassOf(err) != Ambiguous {
		t.Errorf("409: %v", err)
	}
	// Nothing listening: refused before a byte was written.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	down := NewResend(ResendConfig{APIKey: testResendKey, Host: addr, Insecure: true})
	_, err = down.Submit(context.Background(), testSubmission(t, "1"))
	if !Definite(err) || ClassOf(err) != Temporary || strings.Contains(err.Error(), testResendKey) {
		t.Errorf("refused: %v", err)
	}
	// No To left (the only one suppressed): refused before any request.
	sub := testSubmission(t, "1")
	sub.Env.To = []string{"bob@example.net"}
	if _, err := newTestResend(srv).Submit(context.Background(), sub); ClassOf(err) != Permanent {
		t.Errorf("no To: %v", err)
	}
}

func TestParseResendURL(t *testing.T) {
	c, err := ParseResendURL("resend://re_abc%2Bdef@")
	if err != nil || c.APIKey != "re_abc+def" || c.baseURL() != "https://api.resend.com" {
		t.Fatalf("%+v %v", c, err)
	}
	c, err = ParseResendURL("resend://re_abc@127.0.0.1:8080?tls=none")
	if err != nil || c.baseURL() != "http://127.0.0.1:8080" || c.Redacted() != "resend://xxxxx@127.0.0.1:8080?tls=none" {
		t.Fatalf("%+v %v %s", c, err, c.Redacted())
	}
	for _, in := range []string{"resend://", "resend://@host", "resend://re_secret:pw@", "resend://re_secret@?tls=tls",
		"resend://re_secret@host/path", "resend://re_secret@?x=1", "resend://re_secret@host:99999", "resend://re_se cret@"} {
		if _, err := ParseResendURL(in); err == nil {
			t.Errorf("ParseResendURL(%q) = nil error", in)
		} else if strings.Contains(err.Error(), "re_se") {
			t.Errorf("ParseResendURL(%q) error quotes the key: %v", in, err)
		}
	}
}

// While a first request with the send's key is still running at Resend, a
// second one is answered 409 concurrent_idempotent_requests: the email may
// well be taken, so the attempt is Temporary and maybe accepted — asked
// again with the same key, never handed to a fallback transport and never
// refused for good — and once the first answer comes, a later attempt
// gets its email. One email at Resend.
func TestResend_ConcurrentRequestWithTheSameKeyIsMaybeAccepted(t *testing.T) {
	srv := resendtest.Start(t, testResendKey)
	srv.SetPlan(firstOnly(resendtest.Hold))
	first := NewResend(ResendConfig{APIKey: testResendKey, Host: srv.Host, Insecure: true, Tries: 1, Timeout: time.Minute})
	type result struct {
		r   Receipt
		err error
	}
	firstDone := make(chan result, 1)
	go func() {
		r, err := first.Submit(context.Background(), testSubmission(t, "1"))
		firstDone <- result{r, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); len(srv.Requests()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached Resend")
		}
		time.Sleep(5 * time.Millisecond)
	}

	_, err := newTestResend(srv).Submit(context.Background(), testSubmission(t, "1"))
	var e *Error
	if !errors.As(err, &e) || e.Class != Temporary || !e.MaybeAccepted || Definite(err) || e.Code != 409 {
		t.Fatalf("while the first request runs: %#v, want Temporary and maybe accepted", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Errorf("%d requests, want the held one and three tries of the second", len(reqs))
	}
	for _, r := range reqs {
		if r.IdempotencyKey != ResendIdempotencyKey("snd_01TEST") {
			t.Errorf("request %d carried key %q", r.N, r.IdempotencyKey)
		}
	}

	srv.Release()
	res := <-firstDone
	if res.err != nil {
		t.Fatalf("the held request: %v", res.err)
	}
	again, err := newTestResend(srv).Submit(context.Background(), testSubmission(t, "1"))
	if err != nil || again.MessageID != res.r.MessageID {
		t.Fatalf("after the first answer: %v %v, want its email %s", again, err, res.r.MessageID)
	}
	if n := len(srv.Emails()); n != 1 {
		t.Errorf("Resend holds %d emails, want 1", n)
	}
}

// TestResend_CopyHasItsOwnKeyAndNamesItsRecipient: one recipient's copy
// of a send (Submission.Copy) is asked for under a key of its own, and a
// copy for a Cc recipient names it in To, as Resend needs a To.
func TestResend_CopyHasItsOwnKeyAndNamesItsRecipient(t *testing.T) {
	srv := resendtest.Start(t, testResendKey)
	sub := testSubmission(t, "1")
	sub.Env.To, sub.Copy = []string{"bob@example.net"}, "2"
	if _, err := newTestResend(srv).Submit(context.Background(), sub); err != nil {
		t.Fatalf("a Cc recipient's copy: %v", err)
	}
	reqs, emails := srv.Requests(), srv.Emails()
	if len(reqs) != 1 || reqs[0].IdempotencyKey != ResendIdempotencyKey("snd_01TEST")+".2" {
		t.Fatalf("requests %+v, want one under the copy's key", reqs)
	}
	to, _ := emails[0].Payload["to"].([]any)
	if len(to) != 1 || !strings.Contains(to[0].(string), "bob@example.net") || emails[0].Payload["cc"] != nil {
		t.Errorf("the copy goes to %v cc %v, want bob alone in To", emails[0].Payload["to"], emails[0].Payload["cc"])
	}
}
