package delivery_test

import (
	"bytes"
	"maps"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/resendtest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
	"github.com/sendonce/sendonce/internal/transport"
)

// rcptCounter counts the RCPTs a recording server was asked, per address:
// how often a copy was handed over (or begun).
type rcptCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rcptCounter) count(to string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[to]++
}

func (c *rcptCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// onlyTo returns the messages the relay got, each of which must carry
// exactly one envelope recipient, by that recipient.
func onlyTo(t *testing.T, msgs []smtptest.Message) map[string]smtptest.Message {
	t.Helper()
	out := map[string]smtptest.Message{}
	for _, m := range msgs {
		if len(m.To) != 1 {
			t.Fatalf("a copy went to %v, want one envelope recipient", m.To)
		}
		if _, dup := out[m.To[0]]; dup {
			t.Fatalf("%s got two copies", m.To[0])
		}
		out[m.To[0]] = m
	}
	return out
}

// ownCopies checks that each of rcpts got one copy of send s, alone in
// its envelope, with the send's Message-ID and an unsubscribe link of its
// own, and returns the copies by recipient.
func ownCopies(t *testing.T, s map[string]any, msgs []smtptest.Message, rcpts []string) map[string]smtptest.Message {
	t.Helper()
	copies := onlyTo(t, msgs)
	paths := map[string]bool{}
	for _, rcpt := range rcpts {
		m, ok := copies[rcpt]
		if !ok {
			t.Fatalf("no copy for %s; %d messages were handed over", rcpt, len(copies))
		}
		if m.MessageID != bareID(str(s, "message_id")) {
			t.Errorf("%s: Message-ID %q, want the send's %q", rcpt, m.MessageID, str(s, "message_id"))
		}
		paths[unsubscribePath(t, m.Data)] = true
	}
	if len(paths) != len(rcpts) {
		t.Fatalf("%d distinct unsubscribe links among %d copies, want one each", len(paths), len(rcpts))
	}
	return copies
}

// TestCopies_BulkSendToSeveralGoesOutAsOneSignedCopyEach: a bulk send to
// three recipients (to, cc, bcc) is accepted and reaches the relay as
// three messages, each to its one envelope recipient, each with its own
// token in List-Unsubscribe, all with the send's Message-ID and the same
// To and Cc (never the Bcc), each DKIM-verifying with both unsubscribe
// headers in h=. Each recipient is sent. The second copy's one-click POST
// suppresses that recipient only.
func TestCopies_BulkSendToSeveralGoesOutAsOneSignedCopyEach(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, SecretKey: testSecret,
			PublicURL: unsubPublicURL})
		dns := dnstest.Start(t, env.AddDomain(t, map[string]string{"domain": "news.test"}))
		rcpts := []string{"ann@example.com", "bob@example.com", "cat@example.com"}
		id := send(t, env, map[string]any{"from": "news@news.test", "to": "Ann <" + rcpts[0] + ">", "cc": rcpts[1], "bcc": rcpts[2],
			"subject": "News", "text": "x", "stream": "bulk"})
		s := env.WaitStatus(t, id, waitLong, core.StatusSent)
		checkRecipients(t, s, map[string]string{rcpts[0]: "sent", rcpts[1]: "sent", rcpts[2]: "sent"})
		copies := ownCopies(t, s, env.SMTP.Messages(), rcpts)
		for _, rcpt := range rcpts {
			m := copies[rcpt]
			h, err := mail.ReadMessage(bytes.NewReader(m.Data))
			if err != nil {
				t.Fatalf("%s: %v", rcpt, err)
			}
			if !strings.Contains(h.Header.Get("To"), rcpts[0]) || !strings.Contains(h.Header.Get("Cc"), rcpts[1]) || h.Header.Get("Bcc") != "" {
				t.Errorf("%s: To %q, Cc %q, Bcc %q; want Ann, bob, and no Bcc", rcpt, h.Header.Get("To"), h.Header.Get("Cc"), h.Header.Get("Bcc"))
			}
			if head, _, _ := bytes.Cut(m.Data, []byte("\r\n\r\n")); bytes.Contains(head, []byte(rcpts[2])) {
				t.Errorf("%s: the header block shows the Bcc recipient", rcpt)
			}
			vs := verifyDKIM(t, dns, m.Data)
			if len(vs) != 1 || vs[0].Err != nil {
				t.Fatalf("%s: verifications = %+v, want one passing signature", rcpt, vs)
			}
			for _, k := range []string{"List-Unsubscribe", "List-Unsubscribe-Post"} {
				if !slices.ContainsFunc(vs[0].HeaderKeys, func(h string) bool { return strings.EqualFold(h, k) }) {
					t.Errorf("%s: the signature does not cover %s: h=%v", rcpt, k, vs[0].HeaderKeys)
				}
			}
		}

		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: unsubscribePath(t, copies[rcpts[1]].Data), Body: "List-Unsubscribe=One-Click",
			Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
		if r.Status != http.StatusOK {
			t.Fatalf("POST the second copy's link: %d %s", r.Status, r.Body)
		}
		for i, rcpt := range rcpts {
			if n, wantN := len(suppressionsOf(t, env, rcpt)), map[bool]int{true: 1}[i == 1]; n != wantN {
				t.Errorf("%s: %d suppressions after the second copy's unsubscribe, want %d", rcpt, n, wantN)
			}
		}
	})
}

// TestCopies_RetryHandsOverOnlyWhatIsLeftAndALostReplyIsUnknown: the
// second copy's RCPT is deferred (451) at the first attempt while the
// others are accepted; the retry hands over the second copy only, and its
// connection is lost after the end of its data: that recipient is unknown,
// the send is unknown, and nothing is handed over again.
func TestCopies_RetryHandsOverOnlyWhatIsLeftAndALostReplyIsUnknown(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, PublicURL: unsubPublicURL})
		rcpts := []string{"ann@example.com", "bob@example.com", "cat@example.com"}
		var rcptCalls rcptCounter
		first := true
		var mu sync.Mutex
		env.SMTP.SetBehaviour(smtptest.Behaviour{
			RcptFunc: func(_, _, to string) *smtp.SMTPError {
				rcptCalls.count(to)
				mu.Lock()
				defer mu.Unlock()
				if to == rcpts[1] && first {
					first = false
					return reply451
				}
				return nil
			},
			HangUpAfterDataFor: map[string]bool{rcpts[1]: true},
		})
		id := send(t, env, map[string]any{"to": rcpts, "subject": "News", "text": "x", "unsubscribe": true})
		s := env.WaitStatus(t, id, waitLong, core.StatusUnknown)
		checkRecipients(t, s, map[string]string{rcpts[0]: "sent", rcpts[1]: "unknown", rcpts[2]: "sent"})
		if got := countOf(eventTypes(s), core.EventAttemptStarted); got != 2 {
			t.Errorf("%d attempts started, want 2: %v", got, eventTypes(s))
		}
		time.Sleep(settle) // an unknown copy is never resent by itself
		wantCalls := map[string]int{rcpts[0]: 1, rcpts[1]: 2, rcpts[2]: 1}
		if got := rcptCalls.snapshot(); !maps.Equal(got, wantCalls) {
			t.Errorf("RCPTs per recipient %v, want %v: an accepted copy was handed over again, or the unknown one resent", got, wantCalls)
		}
		copies := onlyTo(t, env.SMTP.Messages())
		if len(copies) != 2 || copies[rcpts[0]].Data == nil || copies[rcpts[2]].Data == nil {
			t.Errorf("the relay recorded copies for %v, want ann and cat", slices.Collect(maps.Keys(copies)))
		}
	})
}

// TestCopies_MXHandsEachRecipientItsOwnCopy: under --transport mx a bulk
// send to recipients at two destinations (two of them sharing one) goes
// out as one transaction per recipient, each copy with its own token,
// and every recipient is delivered.
func TestCopies_MXHandsEachRecipientItsOwnCopy(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t, twoDestinations...)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, RetryBase: retryBase, DNSResolver: dns.Addr(),
			PublicURL: unsubPublicURL})
		rcpts := []string{"ann@one.test", "bob@two.test", "cy@also-one.test"}
		id := send(t, env, map[string]any{"to": rcpts[:2], "cc": rcpts[2], "subject": "News", "text": "x", "stream": "bulk"})
		s := env.WaitStatus(t, id, waitLong, core.StatusDelivered)
		checkRecipients(t, s, map[string]string{rcpts[0]: "delivered", rcpts[1]: "delivered", rcpts[2]: "delivered"})
		ownCopies(t, s, env.SMTP.Messages(), rcpts)
	})
}

// TestCopies_ResendTakesEachCopyUnderItsOwnKey: through Resend each copy
// is its own email under its own Idempotency-Key, naming its one
// recipient. Every answer for the second copy is lost at the first
// attempt: the retry asks again for that copy only, with its key, and
// Resend still holds one email per recipient, each id kept for the
// provider's events.
func TestCopies_ResendTakesEachCopyUnderItsOwnKey(t *testing.T) {
	rs := resendtest.Start(t, resendKey)
	rs.SetPlan(func(n int) resendtest.Fault {
		if n >= 2 && n <= 4 { // the second copy's three requests of the first attempt
			return resendtest.Drop
		}
		return resendtest.Pass
	})
	env := sendoncetest.Start(t, sendoncetest.Options{Transport: resendURL(rs.Host), RetryBase: retryBase, PublicURL: unsubPublicURL})
	rcpts := []string{"ann@example.com", "bob@example.com", "cat@example.com"}
	id := send(t, env, map[string]any{"to": rcpts[0], "cc": rcpts[1], "bcc": rcpts[2], "subject": "News", "text": "x", "stream": "bulk"})
	s := env.WaitStatus(t, id, waitLong, core.StatusSent)
	checkRecipients(t, s, map[string]string{rcpts[0]: "sent", rcpts[1]: "sent", rcpts[2]: "sent"})
	perKey := map[string]int{}
	for _, r := range rs.Requests() {
		perKey[r.IdempotencyKey]++
	}
	key := transport.ResendIdempotencyKey(id)
	if wantKeys := map[string]int{key + ".0": 1, key + ".1": 4, key + ".2": 1}; !maps.Equal(perKey, wantKeys) {
		t.Errorf("requests per key %v, want %v", perKey, wantKeys)
	}
	emails := rs.Emails()
	if len(emails) != 3 {
		t.Fatalf("Resend holds %d emails, want one per recipient", len(emails))
	}
	links := map[string]bool{}
	for i, e := range emails {
		to, _ := e.Payload["to"].([]any)
		headers, _ := e.Payload["headers"].(map[string]any)
		list, _ := headers["List-Unsubscribe"].(string)
		links[list] = true
		if len(to) != 1 || !strings.Contains(to[0].(string), rcpts[i]) || e.Payload["cc"] != nil || e.Payload["bcc"] != nil {
			t.Errorf("email %d goes to %v cc %v bcc %v, want %s alone", i, e.Payload["to"], e.Payload["cc"], e.Payload["bcc"], rcpts[i])
		}
	}
	if len(links) != 3 {
		t.Errorf("%d distinct List-Unsubscribe values among 3 emails, want one each", len(links))
	}
	for _, e := range emails { // Resend's events about any copy find the send
		if n := env.QueryInt(t, "SELECT count(*) FROM send_provider_copies WHERE provider = 'resend' AND message_id = ? AND send_id = ?", e.ID, id); n != 1 {
			t.Errorf("email %s: %d records of its id for the send, want 1", e.ID, n)
		}
	}
}

// TestCopies_RefusedCopyBouncesItsRecipientOnly: the relay refuses the
// second copy's recipient for good (550 5.1.1): that recipient bounces
// (and is suppressed), the others' copies are sent, and so is the send.
func TestCopies_RefusedCopyBouncesItsRecipientOnly(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, PublicURL: unsubPublicURL})
		rcpts := []string{"ann@example.com", "bob@example.com", "cat@example.com"}
		env.SMTP.SetBehaviour(smtptest.Behaviour{RcptErrFor: map[string]*smtp.SMTPError{rcpts[1]: reply550}})
		id := send(t, env, map[string]any{"to": rcpts, "subject": "News", "text": "x", "stream": "bulk"})
		s := env.WaitStatus(t, id, waitLong, core.StatusSent)
		checkRecipients(t, s, map[string]string{rcpts[0]: "sent", rcpts[1]: "bounced", rcpts[2]: "sent"})
		if copies := onlyTo(t, env.SMTP.Messages()); len(copies) != 2 {
			t.Errorf("the relay took %d copies, want ann's and cat's", len(copies))
		}
		if n := len(suppressionsOf(t, env, rcpts[1])); n != 1 {
			t.Errorf("%d suppressions of the refused address, want 1", n)
		}
	})
}

// TestCopies_FailoverChainTakesEachCopy: a primary provider that
// definitely takes nothing (429) falls over to the relay copy by copy:
// the relay gets one copy per recipient, each with its own link.
func TestCopies_FailoverChainTakesEachCopy(t *testing.T) {
	rs := resendtest.Start(t, resendKey)
	rs.SetPlan(func(int) resendtest.Fault { return resendtest.TooMany })
	relay := smtptest.Start(t, smtptest.Options{})
	env := sendoncetest.Start(t, sendoncetest.Options{Transport: resendURL(rs.Host), RetryBase: retryBase, PublicURL: unsubPublicURL,
		Providers: server.ProvidersConfig{Fallbacks: []string{"smtp://" + relay.Addr + "?tls=none"}}})
	rcpts := []string{"ann@example.com", "bob@example.com"}
	id := send(t, env, map[string]any{"to": rcpts, "subject": "News", "text": "x", "unsubscribe": true})
	s := env.WaitStatus(t, id, waitLong, core.StatusSent)
	checkRecipients(t, s, map[string]string{rcpts[0]: "sent", rcpts[1]: "sent"})
	copies := onlyTo(t, relay.Messages())
	if len(copies) != 2 || unsubscribePath(t, copies[rcpts[0]].Data) == unsubscribePath(t, copies[rcpts[1]].Data) {
		t.Errorf("the fallback relay got %d copies; want two, each with its own link", len(copies))
	}
	if n := len(rs.Emails()); n != 0 {
		t.Errorf("the refusing primary holds %d emails", n)
	}
}
