package transport_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
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
