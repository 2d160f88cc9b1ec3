package smtptest_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

const body = "Message-ID: <id-1@smtptest>\r\nSubject: hi\r\n\r\nhello\r\n"

// send delivers one message with go-smtp's client and returns the first
// error.
func send(t *testing.T, c *smtp.Client, from string, to []string, data string) error {
	t.Helper()
	defer c.Close()
	if err := c.Mail(from, nil); err != nil {
		return err
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt, nil); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(data)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

func dial(t *testing.T, s *smtptest.Server) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(s.Addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return c
}

func TestRecordsMessages(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{})
	if s.Host != "127.0.0.1" || s.Addr != net.JoinHostPort(s.Host, s.Port) {
		t.Errorf("Addr=%q Host=%q Port=%q", s.Addr, s.Host, s.Port)
	}
	for range 2 {
		if err := send(t, dial(t, s), "a@example.com", []string{"b@example.com", "c@example.com"}, body); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	msgs := s.Messages()
	if len(msgs) != 2 {
		t.Fatalf("got %d messages, want 2", len(msgs))
	}
	m := msgs[0]
	if m.From != "a@example.com" || strings.Join(m.To, " ") != "b@example.com c@example.com" ||
		string(m.Data) != body || m.MessageID != "id-1@smtptest" || m.Auth != "" || m.TLS {
		t.Errorf("message = %+v", m)
	}
	if got := s.MessageIDCounts(); len(got) != 1 || got["id-1@smtptest"] != 2 {
		t.Errorf("MessageIDCounts = %v, want the duplicate counted twice", got)
	}
	if n := s.Connections(); n != 2 {
		t.Errorf("Connections = %d, want 2", n)
	}
	// Messages returns a copy.
	msgs[0].Data[0] = 'X'
	msgs[0].To[0] = "changed"
	if again := s.Messages(); again[0].Data[0] != 'M' || again[0].To[0] != "b@example.com" {
		t.Error("Messages shares memory with the server")
	}
}

func TestNoMessageID(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{})
	if err := send(t, dial(t, s), "a@example.com", []string{"b@example.com"}, "Subject: x\r\n\r\nno id\r\n"); err != nil {
		t.Fatal(err)
	}
	if m := s.Messages(); len(m) != 1 || m[0].MessageID != "" {
		t.Errorf("messages = %+v", m)
	}
	if c := s.MessageIDCounts(); len(c) != 0 {
		t.Errorf("MessageIDCounts = %v, want empty", c)
	}
}

func TestBehaviour(t *testing.T) {
	e451 := &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 0, 0}, Message: "later"}
	e550 := &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 0, 0}, Message: "no"}
	tests := []struct {
		name string
		b    smtptest.Behaviour
		code int // 0: a broken connection
	}{
		{"MailErr", smtptest.Behaviour{MailErr: e451}, 451},
		{"RcptErr", smtptest.Behaviour{RcptErr: e550}, 550},
		{"DataErr", smtptest.Behaviour{DataErr: e550}, 550},
		{"HangUpBeforeData", smtptest.Behaviour{HangUpBeforeData: true}, 0},
		{"HangUpAfterData", smtptest.Behaviour{HangUpAfterData: true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := smtptest.Start(t, smtptest.Options{})
			s.SetBehaviour(tt.b)
			err := send(t, dial(t, s), "a@example.com", []string{"b@example.com"}, body)
			var se *smtp.SMTPError
			switch {
			case err == nil:
				t.Fatal("send succeeded")
			case tt.code == 0 && errors.As(err, &se):
				t.Errorf("got SMTP reply %v, want a broken connection", err)
			case tt.code != 0 && (!errors.As(err, &se) || se.Code != tt.code):
				t.Errorf("got %v, want SMTP %d", err, tt.code)
			}
			if n := len(s.Messages()); n != 0 {
				t.Errorf("recorded %d messages", n)
			}
			// The behaviour applies to sessions started after SetBehaviour.
			s.SetBehaviour(smtptest.Behaviour{})
			if err := send(t, dial(t, s), "a@example.com", []string{"b@example.com"}, body); err != nil {
				t.Errorf("send after reset: %v", err)
			}
		})
	}
}

func TestDelayData(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{})
	s.SetBehaviour(smtptest.Behaviour{DelayData: 150 * time.Millisecond})
	start := time.Now()
	if err := send(t, dial(t, s), "a@example.com", []string{"b@example.com"}, body); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("answered after %v, want at least the delay", d)
	}
	if n := len(s.Messages()); n != 1 {
		t.Errorf("recorded %d messages, want 1", n)
	}
}

func TestReadRate(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{})
	s.SetBehaviour(smtptest.Behaviour{ReadRate: 100 << 10})
	big := body + strings.Repeat("0123456789abcdef\r\n", 2<<10) // 36 KiB: about a third of a second
	start := time.Now()
	if err := send(t, dial(t, s), "a@example.com", []string{"b@example.com"}, big); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("a 36 KiB body read at 100 KiB/s took %v, want at least 300ms", d)
	}
	if m := s.Messages(); len(m) != 1 || len(m[0].Data) < 36<<10 {
		t.Errorf("recorded %d messages, want the whole one", len(m))
	}
}

func TestAuth(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{Username: "u", Password: "p"})

	var se *smtp.SMTPError
	if err := send(t, dial(t, s), "a@example.com", []string{"b@example.com"}, body); !errors.As(err, &se) || se.Code != 530 {
		t.Errorf("MAIL without AUTH: %v, want 530", err)
	}

	c := dial(t, s)
	if err := c.Auth(sasl.NewPlainClient("", "u", "wrong")); !errors.As(err, &se) || se.Code != 535 {
		t.Errorf("wrong password: %v, want 535", err)
	}
	c.Close()

	c = dial(t, s)
	if err := c.Auth(sasl.NewPlainClient("", "u", "p")); err != nil {
		t.Fatalf("AUTH: %v", err)
	}
	if err := send(t, c, "a@example.com", []string{"b@example.com"}, body); err != nil {
		t.Fatal(err)
	}
	if m := s.Messages(); len(m) != 1 || m[0].Auth != "u" {
		t.Errorf("messages = %+v, want one by u", m)
	}
}

func TestTLS(t *testing.T) {
	serverTLS, clientTLS := smtptest.SelfSignedTLS(t)

	t.Run("starttls", func(t *testing.T) {
		s := smtptest.Start(t, smtptest.Options{TLSConfig: serverTLS, Username: "u", Password: "p"})
		c := dial(t, s)
		// Without AllowInsecureAuth, AUTH is not offered before STARTTLS.
		if ok, _ := c.Extension("AUTH"); ok {
			t.Error("AUTH offered in plain text")
		}
		c.Close()

		c, err := smtp.DialStartTLS(s.Addr, clientTLS)
		if err != nil {
			t.Fatalf("DialStartTLS: %v", err)
		}
		if err := c.Auth(sasl.NewPlainClient("", "u", "p")); err != nil {
			t.Fatalf("AUTH: %v", err)
		}
		if err := send(t, c, "a@example.com", []string{"b@example.com"}, body); err != nil {
			t.Fatal(err)
		}
		if m := s.Messages(); len(m) != 1 || !m[0].TLS || m[0].Auth != "u" {
			t.Errorf("messages = %+v", m)
		}
	})

	t.Run("implicit", func(t *testing.T) {
		s := smtptest.Start(t, smtptest.Options{TLSConfig: serverTLS, ImplicitTLS: true})
		for _, name := range []string{"127.0.0.1", "localhost"} {
			cfg := clientTLS.Clone()
			cfg.ServerName = name
			c, err := smtp.DialTLS(s.Addr, cfg)
			if err != nil {
				t.Fatalf("DialTLS as %s: %v", name, err)
			}
			if err := send(t, c, "a@example.com", []string{"b@example.com"}, body); err != nil {
				t.Fatalf("as %s: %v", name, err)
			}
		}
		if m := s.Messages(); len(m) != 2 || !m[0].TLS || !m[1].TLS {
			t.Errorf("messages = %+v", m)
		}
	})

	t.Run("untrusted by default", func(t *testing.T) {
		s := smtptest.Start(t, smtptest.Options{TLSConfig: serverTLS, ImplicitTLS: true})
		// An empty pool rather than the system roots, whose loading can
		// take seconds under the race detector.
		conn, err := tls.Dial("tcp", s.Addr, &tls.Config{ServerName: "127.0.0.1", RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12})
		if err == nil {
			conn.Close()
			t.Fatal("handshake succeeded without trusting the certificate")
		}
	})
}

// recordingTB captures Errorf so the leak check can be observed.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, format)
}

func TestReportsLeakedConnection(t *testing.T) {
	rec := &recordingTB{}
	var leaked net.Conn
	t.Run("leaky", func(t *testing.T) {
		rec.TB = t
		s := smtptest.Start(rec, smtptest.Options{})
		var err error
		leaked, err = net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		// Only connections the server accepted can be seen.
		for deadline := time.Now().Add(5 * time.Second); s.Connections() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	})
	if leaked != nil {
		leaked.Close()
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "still open") {
		t.Errorf("leak check reported %q, want one open-connection error", rec.errs)
	}
}
