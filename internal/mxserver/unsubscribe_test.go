package mxserver_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/mail"
	netsmtp "net/smtp"
	"net/textproto"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

var unsubMailto = regexp.MustCompile(`<mailto:([^>]+)>`)

// TestUnsubscribe_MailtoFormUnsubscribesOnceThroughTheListener: a bulk
// message's List-Unsubscribe names an address at the bounce domain; mail
// to it through the real inbound listener (net/smtp), delivered twice as
// a sender's retry would, suppresses the recipient for bulk mail once
// (one entry of origin unsubscribe, one email.unsubscribed), and an
// altered token is refused at RCPT.
func TestUnsubscribe_MailtoFormUnsubscribesOnceThroughTheListener(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		hooks := make(chan []byte, 16)
		ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			hooks <- b
			w.WriteHeader(http.StatusNoContent)
		}))
		defer ep.Close()
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, Inbound: true, PublicURL: "https://mail.example.test",
			WebhookAllowPrivate: true})
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: env.AdminKey, IdemKey: "wh",
			Body: map[string]any{"endpoint": ep.URL, "events": []string{"email.unsubscribed"}}}); r.Status != http.StatusCreated {
			t.Fatalf("subscribe to email.unsubscribed: %d %s", r.Status, r.Body)
		}
		const addr = "reader@example.com"
		id, _ := sendTo(t, env, env.AdminKey, map[string]any{"to": addr, "subject": "News", "text": "x", "stream": "bulk"})
		env.WaitStatus(t, id, wait, core.StatusSent)
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 {
			t.Fatalf("the relay got %d messages, want 1", len(msgs))
		}
		m, err := mail.ReadMessage(bytes.NewReader(msgs[0].Data))
		if err != nil {
			t.Fatal(err)
		}
		found := unsubMailto.FindStringSubmatch(m.Header.Get("List-Unsubscribe"))
		if found == nil || !strings.HasSuffix(found[1], "@bounces.example.test") {
			t.Fatalf("List-Unsubscribe %q has no mailto: address at the bounce domain", m.Header.Get("List-Unsubscribe"))
		}
		to := found[1]

		local, domain, _ := strings.Cut(to, "@")
		flip := map[bool]string{true: "b", false: "a"}[strings.HasSuffix(local, "a")]
		altered := local[:len(local)-1] + flip + "@" + domain
		if err := netsmtp.SendMail(env.InboundAddr, nil, addr, []string{altered}, []byte("Subject: unsubscribe\r\n\r\nx\r\n")); smtpCodeOf(err) != 550 {
			t.Errorf("mail to an altered token: %v, want 550", err)
		}

		msg := []byte("From: " + addr + "\r\nTo: " + to + "\r\nSubject: unsubscribe\r\n\r\nunsubscribe\r\n")
		for i := range 2 {
			if err := netsmtp.SendMail(env.InboundAddr, nil, addr, []string{strings.ToUpper(to)}, msg); err != nil {
				t.Fatalf("mail to the unsubscribe address (%d): %v", i+1, err)
			}
		}
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/suppressions?email=" + addr, Key: env.AdminKey})
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/suppressions: %d %s", r.Status, r.Body)
		}
		sups, _ := r.JSON(t)["data"].([]any)
		if len(sups) != 1 || sups[0].(map[string]any)["origin"] != core.SuppressionUnsubscribe {
			t.Fatalf("suppressions of %s = %v, want one of origin unsubscribe", addr, sups)
		}
		_, s := get(t, env, env.AdminKey, "/v1/sends/"+id)
		if got := events(s, core.EventUnsubscribed); len(got) != 1 || got[0] != addr {
			t.Fatalf("email.unsubscribed events = %v, want one for %s", got, addr)
		}
		select {
		case b := <-hooks:
			var p struct {
				Type string
				Data struct {
					Recipient string
					EmailID   string `json:"email_id"`
				}
			}
			if err := json.Unmarshal(b, &p); err != nil || p.Type != "email.unsubscribed" || p.Data.Recipient != addr || p.Data.EmailID != id {
				t.Fatalf("webhook delivery %s (%v), want email.unsubscribed for %s", b, err, addr)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no email.unsubscribed webhook delivery within 15s")
		}
	})
}

// smtpCodeOf is the reply code of a net/smtp error, 0 for none.
func smtpCodeOf(err error) int {
	var e *textproto.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
