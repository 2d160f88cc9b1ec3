package delivery_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	msgdkim "github.com/emersion/go-msgauth/dkim"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dkim"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

const testSecret = "0123456789abcdef0123456789abcdef-test-secret"

func verifyDKIM(t *testing.T, dns *dnstest.Server, data []byte) []*msgdkim.Verification {
	t.Helper()
	vs, err := msgdkim.VerifyWithOptions(bytes.NewReader(data), &msgdkim.VerifyOptions{LookupTXT: dns.LookupTXT})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return vs
}

// TestDKIM_SignedMessageVerifiesAgainstThePublishedKey: a message from a
// domain added through the API reaches the relay signed; go-msgauth's
// verifier, reading the record the API said to publish from a DNS server,
// passes it, and fails it once its body or subject is altered.
func TestDKIM_SignedMessageVerifiesAgainstThePublishedKey(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, SecretKey: testSecret})
		record := env.AddDomain(t, map[string]string{"domain": "Signed.Test"}) // RSA-2048 by default
		dns := dnstest.Start(t, record)

		id := send(t, env, map[string]any{
			"from": "News <news@signed.test>", "to": "ann@example.com", "cc": "bob@example.net",
			"subject": "Signed — ünïcødé", "text": "Hello, signed world.\n\nSecond paragraph.",
		})
		env.WaitStatus(t, id, waitLong, core.StatusSent)
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 {
			t.Fatalf("relay got %d messages, want 1", len(msgs))
		}
		data := msgs[0].Data

		vs := verifyDKIM(t, dns, data)
		if len(vs) != 1 || vs[0].Err != nil || vs[0].Domain != "signed.test" {
			t.Fatalf("verifications = %+v (first error %v), want one passing signature of signed.test", vs, vs[0].Err)
		}
		for _, h := range []string{"From", "To", "Cc", "Subject", "Date", "Message-Id", "Mime-Version", "Content-Type"} {
			if !slices.ContainsFunc(vs[0].HeaderKeys, func(k string) bool { return strings.EqualFold(k, h) }) {
				t.Errorf("the signature does not cover %s: h=%v", h, vs[0].HeaderKeys)
			}
		}
		if !bytes.Contains(data, []byte("c=relaxed/relaxed")) {
			t.Errorf("signature is not relaxed/relaxed:\n%s", data)
		}

		for name, tampered := range map[string][]byte{
			"body":    bytes.Replace(data, []byte("Second paragraph."), []byte("Second paragraph!"), 1),
			"subject": bytes.Replace(data, []byte("\r\nSubject: "), []byte("\r\nSubject: Re: "), 1),
		} {
			if bytes.Equal(tampered, data) {
				t.Fatalf("%s: the tampering changed nothing", name)
			}
			vs := verifyDKIM(t, dns, tampered)
			if len(vs) != 1 || vs[0].Err == nil {
				t.Errorf("tampered %s: verifications = %+v, want one failing signature", name, vs)
			}
		}
	})
}

// TestDKIM_OnlyMailFromTheTenantsDomainIsSigned: a From domain the tenant
// has not added, or that another tenant added, is sent unsigned.
func TestDKIM_OnlyMailFromTheTenantsDomainIsSigned(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase})
		_, other := env.NewKey(t, app.NewKeyParams{Name: "other", Tenant: "other", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: other, Body: map[string]string{"domain": "theirs.test", "algorithm": "ed25519"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("POST /v1/domains: %d %s", r.Status, r.Body)
		}
		for _, from := range []string{"a@theirs.test", "b@unknown.test"} {
			id := send(t, env, map[string]any{"from": from, "to": "ann@example.com", "subject": "x", "text": "y"})
			env.WaitStatus(t, id, waitLong, core.StatusSent)
		}
		for _, m := range env.SMTP.Messages() {
			if bytes.Contains(m.Data, []byte("DKIM-Signature")) {
				t.Errorf("message from %s is signed:\n%s", m.From, m.Data)
			}
		}
	})
}

// TestDKIM_KeyThatCannotBeOpenedIsATemporaryFailure: a key sealed under
// another secret fails the attempt as temporary (the secret may be fixed),
// nothing reaches the relay, and the error says why without key material.
func TestDKIM_KeyThatCannotBeOpenedIsATemporaryFailure(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, MaxAttempts: 2, SecretKey: testSecret})
		key, err := dkim.GenerateKey(dkim.Ed25519)
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := dkim.Seal(key, strings.Repeat("another secret ", 3))
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := key.DNSRecord("s1", "locked.test")
		err = env.Server.Store.InTx(context.Background(), func(tx core.Tx) error {
			return tx.InsertDomain(context.Background(), &core.Domain{Tenant: "default", Domain: "locked.test", Selector: "s1",
				Algorithm: "ed25519", PrivateKey: sealed, PublicRecord: rec.Value, CreatedAt: env.Clock.Now()})
		})
		if err != nil {
			t.Fatal(err)
		}
		id := send(t, env, map[string]any{"from": "a@locked.test", "to": "ann@example.com", "subject": "x", "text": "y"})
		s := env.WaitStatus(t, id, waitLong, core.StatusFailed)
		if n := countOf(eventTypes(getSend(t, env, id)), "attempt_failed"); n != 1 {
			t.Errorf("%d attempt_failed events, want 1 (temporary, then gave up)", n)
		}
		if last := str(s, "last_error"); !strings.Contains(last, "sign") || !strings.Contains(last, "SENDONCE_SECRET_KEY") || strings.Contains(last, "PRIVATE KEY") {
			t.Errorf("last_error = %q", last)
		}
		if attempts(t, s) != 0 || len(env.SMTP.Messages()) != 0 {
			t.Errorf("attempts = %d, relay messages = %d; want 0 and 0", attempts(t, s), len(env.SMTP.Messages()))
		}
	})
}

// TestMX_DeliversToTheExchangerTheZoneNames: with --transport mx, the
// message goes to the mail exchanger the recipient domain's MX record
// names (a test server on 127.0.0.1), and a domain that does not exist
// fails permanently without an attempt reaching anyone.
func TestMX_DeliversToTheExchangerTheZoneNames(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t,
			"rcpt.test. MX 10 mx1.rcpt.test.",
			"mx1.rcpt.test. A 127.0.0.1",
		)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, RetryBase: retryBase, DNSResolver: dns.Addr()})
		id := send(t, env, map[string]any{"to": "Ann <ann@rcpt.test>", "subject": "direct", "text": "via MX"})
		s := env.WaitStatus(t, id, waitLong, core.StatusDelivered) // the recipient's own server took it
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 || !slices.Equal(msgs[0].To, []string{"ann@rcpt.test"}) || msgs[0].MessageID != bareID(str(s, "message_id")) {
			t.Fatalf("exchanger got %+v", msgs)
		}
		var askedMX bool
		for _, q := range dns.Queries() {
			askedMX = askedMX || (q.Name == "rcpt.test." && q.Type == "MX")
		}
		if !askedMX {
			t.Errorf("no MX query for rcpt.test: %+v", dns.Queries())
		}

		id = send(t, env, map[string]any{"to": "bob@nowhere.test", "subject": "lost", "text": "x"})
		s = env.WaitStatus(t, id, waitLong, core.StatusBounced) // its only recipient cannot get mail
		if !strings.Contains(str(s, "last_error"), "does not exist") || attempts(t, s) != 0 {
			t.Errorf("send to a missing domain: last_error %q, attempts %d", str(s, "last_error"), attempts(t, s))
		}
		if got := recipientStatuses(s); got["bob@nowhere.test"] != "bounced" {
			t.Errorf("send to a missing domain: recipients %v, want bob@ bounced", got)
		}
	})
}

// TestDKIM_MessageWithAttachmentsVerifies: a message with a file and an
// inline image (multipart/mixed around multipart/related) is signed, and
// the signature verifies over its whole body.
func TestDKIM_MessageWithAttachmentsVerifies(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, SecretKey: testSecret})
		dns := dnstest.Start(t, env.AddDomain(t, map[string]string{"domain": "files.test"}))
		id := send(t, env, map[string]any{
			"from": "files@files.test", "to": "ann@example.com", "subject": "Invoice",
			"text": "See attached.", "html": `<p>Logo: <img src="cid:logo"></p>`,
			"attachments": []map[string]any{
				{"filename": "invoice.pdf", "content": "JVBERi0xLjQKJcfsj6IK"},
				{"filename": "logo.png", "content": "iVBORw0KGgo=", "content_id": "logo"},
			},
		})
		env.WaitStatus(t, id, waitLong, core.StatusSent)
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 {
			t.Fatalf("relay got %d messages, want 1", len(msgs))
		}
		if !bytes.Contains(msgs[0].Data, []byte("multipart/related")) {
			t.Fatalf("no multipart/related in the message:\n%s", msgs[0].Data)
		}
		vs := verifyDKIM(t, dns, msgs[0].Data)
		if len(vs) != 1 || vs[0].Err != nil || vs[0].Domain != "files.test" {
			t.Fatalf("verifications = %+v, want one passing signature of files.test", vs)
		}
	})
}

// TestDKIM_AgentMailNamesItsKeySigned: a message an agent key sends
// carries X-Sendonce-Agent with the key's name, covered by the DKIM
// signature; a person's key sends none, and no key may set it itself.
func TestDKIM_AgentMailNamesItsKeySigned(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, RetryBase: retryBase, SecretKey: testSecret})
	record := env.AddDomain(t, map[string]string{"domain": "signed.test"})
	dns := dnstest.Start(t, record)
	env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "mb",
		Body: map[string]any{"id": "bot", "address": "bot@signed.test"}})
	_, agent := env.NewKey(t, app.NewKeyParams{Name: "support-bot", Scopes: []core.Scope{core.ScopeSend}, Agent: true,
		Mailboxes: []string{"bot"}, AllowRecipients: []string{"example.com"}})
	r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/send", Key: agent, IdemKey: "agent-1",
		Body: map[string]any{"mailbox_id": "bot", "to": "ann@example.com", "subject": "From the bot", "text": "Hi."}})
	if r.Status != http.StatusOK {
		t.Fatalf("agent send: %d %s", r.Status, r.Body)
	}
	env.WaitStatus(t, r.JSON(t)["id"].(string), waitLong, core.StatusSent)
	person := send(t, env, map[string]any{"from": "news@signed.test", "to": "bob@example.com", "subject": "From a person", "text": "Hi."})
	env.WaitStatus(t, person, waitLong, core.StatusSent)
	for _, m := range env.SMTP.Messages() {
		marked := bytes.Contains(m.Data, []byte("\r\nX-Sendonce-Agent: support-bot\r\n"))
		vs := verifyDKIM(t, dns, m.Data)
		if len(vs) != 1 || vs[0].Err != nil {
			t.Fatalf("verifications = %+v", vs)
		}
		covered := slices.ContainsFunc(vs[0].HeaderKeys, func(k string) bool { return strings.EqualFold(k, "X-Sendonce-Agent") })
		switch toAnn := slices.Contains(m.To, "ann@example.com"); {
		case toAnn && (!marked || !covered):
			t.Errorf("the agent's message: marked %v, signed over the mark %v (h=%v)", marked, covered, vs[0].HeaderKeys)
		case !toAnn && (marked || bytes.Contains(m.Data, []byte("X-Sendonce-Agent"))):
			t.Errorf("a person's message carries the agent mark")
		}
	}
	if r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/send", Key: env.AdminKey, IdemKey: "spoof",
		Body: map[string]any{"to": "bob@example.com", "subject": "x", "text": "x", "headers": map[string]string{"X-Sendonce-Agent": "me"}}}); r.Status != http.StatusUnprocessableEntity {
		t.Errorf("a caller setting X-Sendonce-Agent: %d, want 422", r.Status)
	}
}
