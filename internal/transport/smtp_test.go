package transport_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/testkit/smtptest"
	"github.com/sendonce/sendonce/internal/transport"
)

const (
	testUser     = "relay-user"
	testPassword = "correct-horse-battery-staple"
)

// config points at srv with timeouts short enough that a hang fails the
// test quickly.
func config(srv *smtptest.Server, mode transport.TLSMode) transport.SMTPConfig {
	return transport.SMTPConfig{
		Host:           srv.Host,
		Port:           srv.Port,
		TLS:            mode,
		DialTimeout:    5 * time.Second,
		CommandTimeout: 5 * time.Second,
		DataTimeout:    5 * time.Second,
	}
}

var testEnvelope = transport.Envelope{
	From: "sender@example.com",
	To:   []string{"alice@example.org", "bob@example.net"},
}

// testMessage has CRLF line endings (as the message package produces) and a
// line starting with a dot, which must survive dot-stuffing.
func testMessage(id string) []byte {
	return []byte("From: Sender <sender@example.com>\r\n" +
		"To: alice@example.org, bob@example.net\r\n" +
		"Subject: hello\r\n" +
		"Message-ID: <" + id + ">\r\n" +
		"\r\n" +
		"Hi,\r\n" +
		".leading dot\r\n" +
		".\r\n" +
		"bye\r\n")
}

// deliverErr runs Deliver and returns its error as *transport.Error.
func deliverErr(t *testing.T, ctx context.Context, cfg transport.SMTPConfig, raw []byte) *transport.Error {
	t.Helper()
	err := transport.NewSMTP(cfg).Deliver(ctx, testEnvelope, raw)
	if err == nil {
		t.Fatal("Deliver succeeded, want an error")
	}
	var te *transport.Error
	if !errors.As(err, &te) {
		t.Fatalf("Deliver error %T %v is not a *transport.Error", err, err)
	}
	if strings.Contains(err.Error(), testPassword) {
		t.Errorf("error reveals the password: %v", err)
	}
	return te
}

// tlsRelay starts a recording server with opts and points a client at it
// in mode, trusting what clientTLS trusts.
func tlsRelay(t *testing.T, opts smtptest.Options, mode transport.TLSMode, clientTLS *tls.Config) (*smtptest.Server, transport.SMTPConfig) {
	t.Helper()
	srv := smtptest.Start(t, opts)
	cfg := config(srv, mode)
	cfg.TLSConfig = clientTLS
	return srv, cfg
}

// oneMessage returns the one message srv recorded.
func oneMessage(t *testing.T, srv *smtptest.Server) smtptest.Message {
	t.Helper()
	msgs := srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("server got %d messages, want 1", len(msgs))
	}
	return msgs[0]
}

// noMessages checks that srv recorded nothing: a refused delivery leaves
// no message behind.
func noMessages(t *testing.T, srv *smtptest.Server) {
	t.Helper()
	if n := len(srv.Messages()); n != 0 {
		t.Errorf("server recorded %d messages, want 0", n)
	}
}

func checkErr(t *testing.T, te *transport.Error, class transport.Class, stage string, code int, reached bool) {
	t.Helper()
	if te.Class != class || te.Stage != stage || te.Code != code || te.Reached != reached {
		t.Errorf("got class=%v stage=%q code=%d reached=%v, want class=%v stage=%q code=%d reached=%v (%v)",
			te.Class, te.Stage, te.Code, te.Reached, class, stage, code, reached, te)
	}
}

func TestDeliverSuccess(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	raw := testMessage("ok-1@sendonce.test")
	if err := transport.NewSMTP(config(srv, transport.TLSNone)).Deliver(context.Background(), testEnvelope, raw); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	m := oneMessage(t, srv)
	if m.From != testEnvelope.From || strings.Join(m.To, ",") != strings.Join(testEnvelope.To, ",") {
		t.Errorf("envelope = %q -> %q, want %q -> %q", m.From, m.To, testEnvelope.From, testEnvelope.To)
	}
	if !bytes.Equal(m.Data, raw) {
		t.Errorf("message changed in transit:\n got %q\nwant %q", m.Data, raw)
	}
	if m.MessageID != "ok-1@sendonce.test" || m.TLS || m.Auth != "" {
		t.Errorf("message = %+v", m)
	}
	if n := srv.Connections(); n != 1 {
		t.Errorf("connections = %d, want 1", n)
	}
}

// refusal is a behaviour of the receiving server and the error a
// delivery to it must end with.
type refusal struct {
	name  string
	b     smtptest.Behaviour
	class transport.Class
	stage string
	code  int
}

func TestDeliverServerBehaviours(t *testing.T) {
	e451 := &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}
	e550 := &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	tests := []refusal{
		{"MAIL 451", smtptest.Behaviour{MailErr: e451}, transport.Temporary, transport.StageMail, 451},
		{"MAIL 550", smtptest.Behaviour{MailErr: e550}, transport.Permanent, transport.StageMail, 550},
		{"RCPT 451", smtptest.Behaviour{RcptErr: e451}, transport.Temporary, transport.StageRcpt, 451},
		{"RCPT 550", smtptest.Behaviour{RcptErr: e550}, transport.Permanent, transport.StageRcpt, 550},
		{"DATA 451", smtptest.Behaviour{DataErr: e451}, transport.Temporary, transport.StageDataEnd, 451},
		{"DATA 550", smtptest.Behaviour{DataErr: e550}, transport.Permanent, transport.StageDataEnd, 550},
		{"hang-up before DATA", smtptest.Behaviour{HangUpBeforeData: true}, transport.Temporary, transport.StageMail, 0},
		{"hang-up after DATA", smtptest.Behaviour{HangUpAfterData: true}, transport.Ambiguous, transport.StageDataEnd, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := smtptest.Start(t, smtptest.Options{})
			srv.SetBehaviour(tt.b)
			te := deliverErr(t, context.Background(), config(srv, transport.TLSNone), testMessage("b@sendonce.test"))
			checkErr(t, te, tt.class, tt.stage, tt.code, true)
			if tt.code != 0 {
				var se *smtp.SMTPError
				if !errors.As(te, &se) || se.Code != tt.code {
					t.Errorf("error %v does not carry the server's *smtp.SMTPError", te)
				}
			}
			noMessages(t, srv)
			if n := srv.Connections(); n != 1 {
				t.Errorf("connections = %d, want 1", n)
			}
		})
	}
}

func TestDeliverDialClosedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	cfg := transport.SMTPConfig{Host: host, Port: port, TLS: transport.TLSNone, DialTimeout: 2 * time.Second}
	te := deliverErr(t, context.Background(), cfg, testMessage("dial@sendonce.test"))
	checkErr(t, te, transport.Temporary, transport.StageDial, 0, false)
}

func TestDeliverContextCancelledDuringData(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	srv.SetBehaviour(smtptest.Behaviour{DelayData: 10 * time.Second})
	// Long enough for the client to be well past DATA's 354 even on a
	// loaded machine, and far shorter than the server's delay.
	const limit = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	te := deliverErr(t, ctx, config(srv, transport.TLSNone), testMessage("slow@sendonce.test"))
	checkErr(t, te, transport.Ambiguous, transport.StageDataEnd, 0, true)
	if !errors.Is(te, context.DeadlineExceeded) {
		t.Errorf("error %v does not say the context ended", te)
	}
	if d := time.Since(start) - limit; d > 2*time.Second {
		t.Errorf("Deliver returned %v after the context ended", d)
	}
}

func TestDeliverContextCancelledBeforeData(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	te := deliverErr(t, ctx, config(srv, transport.TLSNone), testMessage("c@sendonce.test"))
	checkErr(t, te, transport.Temporary, transport.StageDial, 0, false)
	if !errors.Is(te, context.Canceled) {
		t.Errorf("error %v does not say the context was cancelled", te)
	}
}

func TestDeliverDataTimeout(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	srv.SetBehaviour(smtptest.Behaviour{DelayData: 10 * time.Second})
	cfg := config(srv, transport.TLSNone)
	cfg.DataTimeout = 300 * time.Millisecond
	te := deliverErr(t, context.Background(), cfg, testMessage("timeout@sendonce.test"))
	checkErr(t, te, transport.Ambiguous, transport.StageDataEnd, 0, true)
	var ne net.Error
	if !errors.As(te, &ne) || !ne.Timeout() {
		t.Errorf("error %v is not a timeout", te)
	}
}

func TestDeliverTLS(t *testing.T) {
	serverTLS, clientTLS := smtptest.SelfSignedTLS(t)
	tests := []struct {
		name    string
		opts    smtptest.Options
		mode    transport.TLSMode
		wantTLS bool
		wantErr bool
	}{
		{"starttls", smtptest.Options{TLSConfig: serverTLS}, transport.TLSStartTLS, true, false},
		{"implicit tls", smtptest.Options{TLSConfig: serverTLS, ImplicitTLS: true}, transport.TLSImplicit, true, false},
		{"opportunistic with STARTTLS", smtptest.Options{TLSConfig: serverTLS}, transport.TLSOpportunistic, true, false},
		{"opportunistic without STARTTLS", smtptest.Options{}, transport.TLSOpportunistic, false, false},
		{"none ignores STARTTLS", smtptest.Options{TLSConfig: serverTLS}, transport.TLSNone, false, false},
		{"starttls not offered", smtptest.Options{}, transport.TLSStartTLS, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, cfg := tlsRelay(t, tt.opts, tt.mode, clientTLS)
			err := transport.NewSMTP(cfg).Deliver(context.Background(), testEnvelope, testMessage("tls@sendonce.test"))
			if tt.wantErr {
				var te *transport.Error
				if !errors.As(err, &te) {
					t.Fatalf("Deliver = %v, want a *transport.Error", err)
				}
				checkErr(t, te, transport.Temporary, transport.StageTLS, 0, true)
				noMessages(t, srv)
				return
			}
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			if m := oneMessage(t, srv); m.TLS != tt.wantTLS {
				t.Errorf("message TLS = %v, want %v", m.TLS, tt.wantTLS)
			}
		})
	}
}

func TestDeliverTLSUntrustedCertificate(t *testing.T) {
	serverTLS, _ := smtptest.SelfSignedTLS(t)
	// The client trusts another certificate (and not the system roots,
	// whose loading is slow under the race detector).
	_, otherClientTLS := smtptest.SelfSignedTLS(t)
	for _, tt := range []struct {
		name string
		mode transport.TLSMode
		opts smtptest.Options
	}{
		{"starttls", transport.TLSStartTLS, smtptest.Options{TLSConfig: serverTLS}},
		// Opportunistic mode does not fall back to plain text once the
		// server offered STARTTLS and the handshake failed.
		{"opportunistic", transport.TLSOpportunistic, smtptest.Options{TLSConfig: serverTLS}},
		{"implicit", transport.TLSImplicit, smtptest.Options{TLSConfig: serverTLS, ImplicitTLS: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, cfg := tlsRelay(t, tt.opts, tt.mode, otherClientTLS)
			te := deliverErr(t, context.Background(), cfg, testMessage("x@sendonce.test"))
			// With implicit TLS no greeting can be read before the handshake.
			checkErr(t, te, transport.Temporary, transport.StageTLS, 0, tt.mode != transport.TLSImplicit)
			var ve *tls.CertificateVerificationError
			if !errors.As(te, &ve) {
				t.Errorf("error %v is not a certificate verification error", te)
			}
			noMessages(t, srv)
		})
	}
}

func TestDeliverAuth(t *testing.T) {
	serverTLS, clientTLS := smtptest.SelfSignedTLS(t)
	tests := []struct {
		name     string
		opts     smtptest.Options
		mode     transport.TLSMode
		user, pw string
		class    transport.Class // 0: success
		stage    string
		code     int
	}{
		{"plain text with tls=none", smtptest.Options{Username: testUser, Password: testPassword}, transport.TLSNone, testUser, testPassword, 0, "", 0},
		{"over STARTTLS", smtptest.Options{Username: testUser, Password: testPassword, TLSConfig: serverTLS}, transport.TLSStartTLS, testUser, testPassword, 0, "", 0},
		{"over implicit TLS", smtptest.Options{Username: testUser, Password: testPassword, TLSConfig: serverTLS, ImplicitTLS: true}, transport.TLSImplicit, testUser, testPassword, 0, "", 0},
		{"wrong password", smtptest.Options{Username: testUser, Password: "something-else"}, transport.TLSNone, testUser, testPassword, transport.Permanent, transport.StageAuth, 535},
		{"wrong user", smtptest.Options{Username: "other", Password: testPassword}, transport.TLSNone, testUser, testPassword, transport.Permanent, transport.StageAuth, 535},
		{"not over plain text when opportunistic", smtptest.Options{Username: testUser, Password: testPassword}, transport.TLSOpportunistic, testUser, testPassword, transport.Temporary, transport.StageAuth, 0},
		{"server offers no AUTH", smtptest.Options{}, transport.TLSNone, testUser, testPassword, transport.Temporary, transport.StageAuth, 0},
		{"server requires AUTH", smtptest.Options{Username: testUser, Password: testPassword}, transport.TLSNone, "", "", transport.Permanent, transport.StageMail, 530},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, cfg := tlsRelay(t, tt.opts, tt.mode, clientTLS)
			cfg.Username, cfg.Password = tt.user, tt.pw
			if tt.class != 0 {
				te := deliverErr(t, context.Background(), cfg, testMessage("auth@sendonce.test"))
				checkErr(t, te, tt.class, tt.stage, tt.code, true)
				noMessages(t, srv)
				return
			}
			if err := transport.NewSMTP(cfg).Deliver(context.Background(), testEnvelope, testMessage("auth@sendonce.test")); err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			if m := oneMessage(t, srv); m.Auth != testUser {
				t.Fatalf("message authenticated as %q, want %q", m.Auth, testUser)
			}
		})
	}
}

func TestDeliverEnvelopeErrors(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	cfg := config(srv, transport.TLSNone)
	tests := []struct {
		name  string
		env   transport.Envelope
		stage string
	}{
		{"no recipients", transport.Envelope{From: "a@example.com"}, transport.StageRcpt},
		{"empty recipient", transport.Envelope{From: "a@example.com", To: []string{""}}, transport.StageRcpt},
		{"display name", transport.Envelope{From: "a@example.com", To: []string{"Bob <bob@example.com>"}}, transport.StageRcpt},
		{"CRLF in sender", transport.Envelope{From: "a@example.com\r\nRCPT TO:<x@example.com>", To: []string{"b@example.com"}}, transport.StageMail},
	}
	for _, tt := range tests {
		err := transport.NewSMTP(cfg).Deliver(context.Background(), tt.env, testMessage("env@sendonce.test"))
		var te *transport.Error
		if !errors.As(err, &te) {
			t.Fatalf("%s: Deliver = %v, want a *transport.Error", tt.name, err)
		}
		checkErr(t, te, transport.Permanent, tt.stage, 0, false)
	}
	if n := srv.Connections(); n != 0 {
		t.Errorf("connections = %d, want none for envelopes that cannot be sent", n)
	}
}

func TestDeliverNullSenderAndUTF8(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	env := transport.Envelope{From: "", To: []string{"jürgen@例え.jp"}}
	if err := transport.NewSMTP(config(srv, transport.TLSNone)).Deliver(context.Background(), env, testMessage("utf8@sendonce.test")); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if m := oneMessage(t, srv); m.From != "" || m.To[0] != env.To[0] {
		t.Fatalf("message = %+v", m)
	}
}

func TestDeliverBadConfig(t *testing.T) {
	for _, cfg := range []transport.SMTPConfig{
		{},
		{Host: "127.0.0.1", TLS: "ssl"},
		{Host: "127.0.0.1", HELOName: "bad name"},
	} {
		err := transport.NewSMTP(cfg).Deliver(context.Background(), testEnvelope, testMessage("cfg@sendonce.test"))
		var te *transport.Error
		if !errors.As(err, &te) {
			t.Fatalf("Deliver(%+v) = %v, want a *transport.Error", cfg, err)
		}
		checkErr(t, te, transport.Temporary, transport.StageDial, 0, false)
	}
}

func TestDeliverConcurrent(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	tr := transport.NewSMTP(config(srv, transport.TLSNone))
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- tr.Deliver(context.Background(), testEnvelope, testMessage(fmt.Sprintf("c%d@sendonce.test", i)))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Deliver: %v", err)
		}
	}
	counts := srv.MessageIDCounts()
	if len(counts) != n {
		t.Errorf("got %d distinct messages, want %d", len(counts), n)
	}
	for id, c := range counts {
		if c != 1 {
			t.Errorf("message %s received %d times", id, c)
		}
	}
}

// fakeServer plays one scripted SMTP conversation on 127.0.0.1, for
// situations the go-smtp server cannot produce. It returns a config that
// points at it.
func fakeServer(t *testing.T, script func(c *textproto.Conn)) transport.SMTPConfig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		script(textproto.NewConn(conn))
	}()
	t.Cleanup(func() {
		ln.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("fake server did not finish")
		}
	})
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	return transport.SMTPConfig{
		Host: host, Port: port, TLS: transport.TLSNone,
		DialTimeout: 2 * time.Second, CommandTimeout: 2 * time.Second, DataTimeout: 2 * time.Second,
	}
}

// expect reads one command line and checks its prefix.
func expect(t *testing.T, c *textproto.Conn, prefix string) string {
	line, err := c.ReadLine()
	if err != nil {
		t.Errorf("fake server: reading %q: %v", prefix, err)
		return ""
	}
	if !strings.HasPrefix(strings.ToUpper(line), strings.ToUpper(prefix)) {
		t.Errorf("fake server: got %q, want %s…", line, prefix)
	}
	return line
}

// upToData plays the server from the greeting to the end of the body.
func upToData(t *testing.T, c *textproto.Conn) {
	c.PrintfLine("220 fake ESMTP")
	expect(t, c, "EHLO ")
	c.PrintfLine("250 fake")
	mailToData(t, c)
}

// offerAuth plays the server from the greeting to its EHLO answer, which
// offers the one AUTH mechanism mech.
func offerAuth(t *testing.T, c *textproto.Conn, mech string) {
	c.PrintfLine("220 fake ESMTP")
	expect(t, c, "EHLO ")
	c.PrintfLine("250-fake")
	c.PrintfLine("250 AUTH %s", mech)
}

// mailToData plays the server from MAIL FROM to the end of the body.
func mailToData(t *testing.T, c *textproto.Conn) {
	expect(t, c, "MAIL FROM:")
	c.PrintfLine("250 ok")
	expect(t, c, "RCPT TO:")
	c.PrintfLine("250 ok")
	expect(t, c, "RCPT TO:")
	c.PrintfLine("250 ok")
	expect(t, c, "DATA")
	c.PrintfLine("354 go ahead")
	if _, err := c.ReadDotBytes(); err != nil {
		t.Errorf("fake server: reading body: %v", err)
	}
}

func TestDeliverGreetingFailures(t *testing.T) {
	tests := []struct {
		name    string
		script  func(c *textproto.Conn)
		class   transport.Class
		code    int
		reached bool
	}{
		{"554 greeting", func(c *textproto.Conn) { c.PrintfLine("554 5.7.1 go away") }, transport.Permanent, 554, true},
		{"421 greeting", func(c *textproto.Conn) { c.PrintfLine("421 4.3.2 busy") }, transport.Temporary, 421, true},
		{"closed before greeting", func(c *textproto.Conn) {}, transport.Temporary, 0, false},
		{"garbage greeting", func(c *textproto.Conn) { c.PrintfLine("HTTP/1.1 400 Bad Request") }, transport.Temporary, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := deliverErr(t, context.Background(), fakeServer(t, tt.script), testMessage("g@sendonce.test"))
			checkErr(t, te, tt.class, transport.StageGreeting, tt.code, tt.reached)
		})
	}
}

func TestDeliverCommandTimeoutBeforeData(t *testing.T) {
	release := make(chan struct{})
	cfg := fakeServer(t, func(c *textproto.Conn) {
		c.PrintfLine("220 fake ESMTP")
		expect(t, c, "EHLO ")
		<-release // never answer until the client gave up
	})
	cfg.CommandTimeout = 200 * time.Millisecond
	te := deliverErr(t, context.Background(), cfg, testMessage("t@sendonce.test"))
	close(release)
	checkErr(t, te, transport.Temporary, transport.StageEHLO, 0, true)
}

// TestDeliverFinalReply: what the server does after the body decides the
// outcome: any 2xx is success, even when QUIT then fails; a reply that is
// not SMTP leaves it ambiguous.
func TestDeliverFinalReply(t *testing.T) {
	for _, tt := range []struct {
		name      string
		afterData func(t *testing.T, c *textproto.Conn)
		ambiguous bool
	}{
		{"QUIT failure is success", func(t *testing.T, c *textproto.Conn) {
			c.PrintfLine("250 2.0.0 queued")
			expect(t, c, "QUIT")
			// Hang up without the 221.
		}, false},
		{"any 2xx is success", func(t *testing.T, c *textproto.Conn) {
			c.PrintfLine("251 2.0.0 queued elsewhere")
			expect(t, c, "QUIT")
			c.PrintfLine("221 bye")
		}, false},
		{"malformed is ambiguous", func(t *testing.T, c *textproto.Conn) { c.PrintfLine("what?") }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fakeServer(t, func(c *textproto.Conn) {
				upToData(t, c)
				tt.afterData(t, c)
			})
			if tt.ambiguous {
				te := deliverErr(t, context.Background(), cfg, testMessage("m@sendonce.test"))
				checkErr(t, te, transport.Ambiguous, transport.StageDataEnd, 0, true)
				return
			}
			if err := transport.NewSMTP(cfg).Deliver(context.Background(), testEnvelope, testMessage("q@sendonce.test")); err != nil {
				t.Fatalf("Deliver = %v, want success", err)
			}
		})
	}
}

func TestDeliverAuthLoginFallback(t *testing.T) {
	cfg := fakeServer(t, func(c *textproto.Conn) {
		offerAuth(t, c, "LOGIN")
		expect(t, c, "AUTH LOGIN cmVsYXktdXNlcg==") // relay-user
		c.PrintfLine("334 UGFzc3dvcmQ6")            // Password:
		if got := expect(t, c, ""); got != "Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ==" {
			t.Errorf("fake server: LOGIN password line = %q", got)
		}
		c.PrintfLine("235 2.7.0 ok")
		mailToData(t, c)
		c.PrintfLine("250 queued")
		expect(t, c, "QUIT")
		c.PrintfLine("221 bye")
	})
	cfg.Username, cfg.Password = testUser, testPassword
	if err := transport.NewSMTP(cfg).Deliver(context.Background(), testEnvelope, testMessage("l@sendonce.test")); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
}

func TestDeliverErrorRedactsEchoedPassword(t *testing.T) {
	cfg := fakeServer(t, func(c *textproto.Conn) {
		offerAuth(t, c, "PLAIN")
		expect(t, c, "AUTH PLAIN ")
		c.PrintfLine("535 5.7.8 password %s is wrong", testPassword)
		// go-smtp cancels the exchange, then the transport says QUIT.
		for range 2 {
			if _, err := c.ReadLine(); err != nil {
				return
			}
			c.PrintfLine("221 bye")
		}
	})
	cfg.Username, cfg.Password = testUser, testPassword
	te := deliverErr(t, context.Background(), cfg, testMessage("r@sendonce.test"))
	checkErr(t, te, transport.Permanent, transport.StageAuth, 535, true)
	var se *smtp.SMTPError
	if !errors.As(te, &se) {
		t.Errorf("redaction lost the *smtp.SMTPError: %v", te)
	}
}
