package submission_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/submission"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestSubmission_RefusalsHaveTheirCodes: every refusal docs/smtp.md lists,
// with its SMTP code, and none of them creates a send.
func TestSubmission_RefusalsHaveTheirCodes(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		to := []string{"ann@example.com"}

		c, err := smtp.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Mail("sender@example.com", nil); code(err) != 530 {
			t.Errorf("MAIL before AUTH: %v, want 530", err)
		}
		if err := c.Auth(sasl.NewPlainClient("", "app", "so_not_a_key")); code(err) != 535 {
			t.Errorf("AUTH with a bad key: %v, want 535", err)
		}
		_, readOnly := env.NewKey(t, app.NewKeyParams{Name: "ro", Scopes: []core.Scope{core.ScopeRead}})
		c2, _ := smtp.Dial(addr)
		defer c2.Close()
		if err := c2.Auth(sasl.NewPlainClient("", "app", readOnly)); code(err) != 535 {
			t.Errorf("AUTH with a key without scope send: %v, want 535", err)
		}

		admin := dial(t, addr, env.AdminKey)
		many := make([]string, 51)
		for i := range many {
			many[i] = "r" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + "@example.com"
		}
		if _, err := submit(admin, "sender@example.com", many, mail(newMsgID(), "x")); code(err) != 452 {
			t.Errorf("51 recipients: %v, want 452 at the 51st", err)
		}
		if _, err := submit(admin, "sender@example.com", []string{"ann@example..com"}, mail(newMsgID(), "x")); code(err) != 553 {
			t.Errorf("bad recipient: %v, want 553", err)
		}
		if _, err := submit(admin, "", to, mail(newMsgID(), "x")); code(err) != 553 {
			t.Errorf("null sender: %v, want 553", err)
		}
		noFrom := []byte("To: ann@example.com\r\nSubject: x\r\nMessage-ID: " + newMsgID() + "\r\n\r\nbody\r\n")
		if _, err := submit(admin, "sender@example.com", to, noFrom); code(err) != 550 {
			t.Errorf("message without From: %v, want 550", err)
		}
		badFrom := []byte("From: nobody\r\nTo: ann@example.com\r\nSubject: x\r\n\r\nbody\r\n")
		if _, err := submit(admin, "sender@example.com", to, badFrom); code(err) != 550 {
			t.Errorf("message with an invalid From: %v, want 550", err)
		}

		// A key limited to a mailbox sends only from its address.
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "mb-news",
			Body: map[string]any{"id": "news", "address": "news@example.com"}})
		if r.Status != 201 {
			t.Fatalf("POST /v1/mailboxes: %d %s", r.Status, r.Body)
		}
		_, limited := env.NewKey(t, app.NewKeyParams{Name: "news", Scopes: []core.Scope{core.ScopeSend}, Mailboxes: []string{"news"}})
		lc := dial(t, addr, limited)
		if _, err := submit(lc, "sender@example.com", to, mail(newMsgID(), "x")); code(err) != 550 {
			t.Errorf("MAIL FROM outside the key's mailboxes: %v, want 550", err)
		}
		if _, err := submit(lc, "news@example.com", to, mail(newMsgID(), "x")); code(err) != 550 {
			t.Errorf("From header outside the key's mailbox: %v, want 550", err)
		}
		ok := []byte(strings.Replace(string(mail(newMsgID(), "x")), "App <sender@example.com>", "News <news@example.com>", 1))
		text, err := submit(lc, "news@example.com", to, ok)
		if err != nil {
			t.Fatalf("the mailbox's own address: %v", err)
		}
		if got := env.QueryInt(t, `SELECT COUNT(*) FROM sends WHERE mailbox_id = 'news' AND id = ?`, sendID(t, text)); got != 1 {
			t.Errorf("the send is not from mailbox news")
		}
		if n := env.QueryInt(t, `SELECT COUNT(*) FROM sends`); n != 1 {
			t.Errorf("%d sends after the refusals and one acceptance, want 1", n)
		}
	})
}

// TestSubmission_AgentKeyGuardrails: an agent key over SMTP is held to
// what it is held to over HTTP: no bcc (an envelope recipient in no To or
// Cc), no extra headers, the recipient allowlist — and its messages are
// audited.
func TestSubmission_AgentKeyGuardrails(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		_, agent := env.NewKey(t, app.NewKeyParams{Name: "agent", Scopes: []core.Scope{core.ScopeSend}, Agent: true, AllowRecipients: []string{"example.com"}})
		c := dial(t, addr, agent)
		from := "sender@example.com" // the default mailbox's address (sendoncetest)
		if _, err := submit(c, from, []string{"ann@example.com", "hidden@example.com"}, mail(newMsgID(), "x")); code(err) != 550 {
			t.Errorf("bcc recipient: %v, want 550", err)
		}
		if _, err := submit(c, from, []string{"ann@example.com"}, mail(newMsgID(), "x", "X-Extra: 1")); code(err) != 550 {
			t.Errorf("extra header: %v, want 550", err)
		}
		if _, err := submit(c, from, []string{"eve@elsewhere.net"}, mail(newMsgID(), "x")); code(err) != 550 {
			t.Errorf("recipient outside the allowlist: %v, want 550", err)
		}
		text, err := submit(c, from, []string{"ann@example.com"}, mail(newMsgID(), "x"))
		if err != nil {
			t.Fatalf("a message within the guardrails: %v", err)
		}
		id := sendID(t, text)
		if s, err := env.Server.Store.Send(context.Background(), "default", id); err != nil || !bytes.HasPrefix(s.Raw, []byte("X-Sendonce-Agent: agent\r\n")) {
			t.Errorf("the agent's message does not name it (X-Sendonce-Agent): %v %.80q", err, s.Raw)
		}
		if n := env.QueryInt(t, `SELECT COUNT(*) FROM audit_log WHERE send_id = ? AND outcome = 'created'`, id); n != 1 {
			t.Errorf("%d audit entries for the agent's send, want 1", n)
		}
		if n := env.QueryInt(t, `SELECT COUNT(*) FROM audit_log WHERE outcome = 'refused'`); n != 2 {
			t.Errorf("%d refused audit entries, want 2 (bcc, header; the allowlist refuses at RCPT)", n)
		}
	})
}

// TestSubmission_AuthNeedsTLSOffLoopback: with a certificate, STARTTLS is
// offered and AUTH LOGIN works over it; a client on a non-loopback
// address is not offered AUTH before TLS and is refused it.
func TestSubmission_AuthNeedsTLSOffLoopback(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	srvTLS, cliTLS := smtptest.SelfSignedTLS(t)
	cliTLS.ServerName = "localhost"
	sub := submission.New(env.Server.Service, nil, submission.Config{TLS: srvTLS}, nil)

	addr := serve(t, sub, "127.0.0.1:0", false)
	c, err := smtp.DialStartTLS(addr, cliTLS)
	if err != nil {
		t.Fatalf("STARTTLS: %v", err)
	}
	defer c.Close()
	if !c.SupportsAuth("LOGIN") || !c.SupportsAuth("PLAIN") {
		t.Errorf("AUTH PLAIN and LOGIN are not offered over TLS")
	}
	if err := c.Auth(sasl.NewLoginClient("app", env.AdminKey)); err != nil {
		t.Fatalf("AUTH LOGIN over TLS: %v", err)
	}
	if _, err := submit(c, "sender@example.com", []string{"ann@example.com"}, mail(newMsgID(), "over TLS")); err != nil {
		t.Errorf("submit over TLS: %v", err)
	}

	tlsAddr := serve(t, sub, "127.0.0.1:0", true)
	ic, err := smtp.DialTLS(tlsAddr, cliTLS)
	if err != nil {
		t.Fatalf("implicit TLS: %v", err)
	}
	defer ic.Close()
	if err := ic.Auth(sasl.NewPlainClient("", "app", env.AdminKey)); err != nil {
		t.Errorf("AUTH PLAIN over implicit TLS: %v", err)
	}

	ip := externalIP(t)
	ext := serve(t, sub, net.JoinHostPort(ip, "0"), false)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", ext)
	if err != nil {
		t.Fatal(err)
	}
	pc := smtp.NewClient(conn)
	defer pc.Close()
	if err := pc.Hello("client"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := pc.Extension("AUTH"); ok {
		t.Errorf("AUTH is offered in plain text to a client on %s", ip)
	}
	if err := pc.Auth(sasl.NewPlainClient("", "app", env.AdminKey)); code(err) != 523 {
		t.Errorf("AUTH in plain text off loopback: %v, want 523 (TLS required)", err)
	}
	conn2, err := d.Dial("tcp", ext)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := smtp.NewClientStartTLS(conn2, cliTLS)
	if err != nil {
		t.Fatalf("STARTTLS off loopback: %v", err)
	}
	defer tc.Close()
	if err := tc.Auth(sasl.NewPlainClient("", "app", env.AdminKey)); err != nil {
		t.Errorf("AUTH after STARTTLS off loopback: %v", err)
	}
}

// externalIP is an address of this machine that is not loopback.
func externalIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no non-loopback IPv4 address to test AUTH off loopback")
	return ""
}

// TestSubmission_SessionBounds: past MaxSessions a connection is greeted
// with 421 and closed, and a closed one frees its slot; past
// MaxSessionsPerKey, AUTH gets 454; an idle client is cut at the command
// timeout.
func TestSubmission_SessionBounds(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	sub := submission.New(env.Server.Service, nil, submission.Config{MaxSessions: 3, MaxSessionsPerKey: 2, CommandTimeout: 2 * time.Second}, nil)
	addr := serve(t, sub, "127.0.0.1:0", false)
	hold := func() *smtp.Client {
		c, err := smtp.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := hold(), hold()
	for _, c := range []*smtp.Client{a, b} {
		if err := c.Auth(sasl.NewPlainClient("", "app", env.AdminKey)); err != nil {
			t.Fatalf("AUTH within the per-key bound: %v", err)
		}
	}
	third := hold()
	if err := third.Auth(sasl.NewPlainClient("", "app", env.AdminKey)); code(err) != 454 {
		t.Errorf("third session of one key: %v, want 454", err)
	}
	if err := hold().Hello("x"); code(err) != 421 {
		t.Errorf("fourth connection: %v, want 421 as its greeting", err)
	}
	third.Close()
	// Its slot is free once the server has seen the close; until then a
	// connection is still greeted 421. Retried, within a bound.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := hold().Hello("x")
		if err == nil {
			break
		}
		if code(err) != 421 || time.Now().After(deadline) {
			t.Errorf("a connection after one closed: %v", err)
			break
		}
	}
	time.Sleep(2500 * time.Millisecond) // past the command timeout: the server hung up
	if err := a.Noop(); err == nil {
		t.Errorf("an idle session outlived the command timeout")
	}
	if c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}); err == nil {
		c.Close()
		t.Errorf("a TLS handshake succeeded on the plain listener")
	}
}

// TestSubmission_SizeLimit: SIZE is advertised with --max-message-size; a
// message past it is 552 and makes no send, and the session goes on.
func TestSubmission_SizeLimit(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	sub := submission.New(env.Server.Service, nil, submission.Config{MaxMessageBytes: 4096}, nil)
	c := dial(t, serve(t, sub, "127.0.0.1:0", false), env.AdminKey)
	if ok, size := c.Extension("SIZE"); !ok || size != "4096" {
		t.Errorf("EHLO SIZE = %v %q, want 4096", ok, size)
	}
	to := []string{"ann@example.com"}
	big := mail(newMsgID(), strings.Repeat(strings.Repeat("x", 78)+"\r\n", 60))
	if _, err := submit(c, "sender@example.com", to, big); code(err) != 552 {
		t.Errorf("message past SIZE: %v, want 552", err)
	}
	if _, err := submit(c, "sender@example.com", to, mail(newMsgID(), "small")); err != nil {
		t.Errorf("a message within SIZE after the 552: %v", err)
	}
	if n := env.QueryInt(t, `SELECT COUNT(*) FROM sends`); n != 1 {
		t.Errorf("%d sends, want 1", n)
	}
}

// TestSubmission_RevokedKeyStopsMidSession: a key revoked while its
// session is open is refused at the next MAIL (535), as its next HTTP
// request would be.
func TestSubmission_RevokedKeyStopsMidSession(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		k, secret := env.NewKey(t, app.NewKeyParams{Name: "soon revoked", Scopes: []core.Scope{core.ScopeSend}})
		c := dial(t, addr, secret)
		to := []string{"ann@example.com"}
		if _, err := submit(c, "sender@example.com", to, mail(newMsgID(), "before")); err != nil {
			t.Fatalf("before the revocation: %v", err)
		}
		if err := env.Server.Service.RevokeKey(t.Context(), k.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := submit(c, "sender@example.com", to, mail(newMsgID(), "after")); code(err) != 535 {
			t.Errorf("after the revocation: %v, want 535", err)
		}
	})
}
