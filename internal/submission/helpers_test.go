package submission_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/submission"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

const waitLong = 20 * time.Second

// startEnv starts sendonce with the recording relay and serves its SMTP
// submission server on 127.0.0.1.
func startEnv(t *testing.T, b sendoncetest.Backend) (*sendoncetest.Env, string) {
	t.Helper()
	env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true})
	return env, serve(t, env.Server.Submission, "127.0.0.1:0", false)
}

// eachEnv runs fn as a subtest per backend, on startEnv's instance and
// submission address.
func eachEnv(t *testing.T, fn func(t *testing.T, env *sendoncetest.Env, addr string)) {
	t.Helper()
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env, addr := startEnv(t, b)
		fn(t, env, addr)
	})
}

// serve listens on addr and serves sub there until the test ends.
func serve(t testing.TB, sub *submission.Server, addr string, implicitTLS bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		if implicitTLS {
			done <- sub.ServeTLS(ln)
		} else {
			done <- sub.Serve(ln)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sub.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// dial connects and authenticates with AUTH PLAIN.
func dial(t testing.TB, addr, secret string) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Auth(sasl.NewPlainClient("", "app", secret)); err != nil {
		t.Fatalf("AUTH PLAIN: %v", err)
	}
	return c
}

// dialHello connects to addr and says EHLO as name, without AUTH; the
// client is closed when the test ends. The error is the dial's or the
// EHLO's: a refusal past a connection limit is read with the greeting,
// at EHLO.
func dialHello(t testing.TB, addr, name string) (*smtp.Client, error) {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, c.Hello(name)
}

// submit runs one mail transaction and returns the DATA reply's text, or
// the first refusal.
func submit(c *smtp.Client, from string, to []string, data []byte) (string, error) {
	return smtptest.Transact(c, from, to, data)
}

// code is the SMTP reply code of err (0 when it is not an SMTP reply).
func code(err error) int {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// enhanced is the enhanced status code of err, e.g. "5.7.0".
func enhanced(err error) string {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return fmt.Sprintf("%d.%d.%d", se.EnhancedCode[0], se.EnhancedCode[1], se.EnhancedCode[2])
	}
	return ""
}

// sendID is the send id a 250 names.
func sendID(t *testing.T, text string) string {
	t.Helper()
	i := strings.Index(text, "snd_")
	if i < 0 {
		t.Fatalf("250 text %q names no send", text)
	}
	return strings.TrimRight(strings.Fields(text[i:])[0], ";.,")
}

// mail is a small message with the given extra header lines.
func mail(msgID, body string, extra ...string) []byte {
	var b strings.Builder
	b.WriteString("From: App <sender@example.com>\r\nTo: ann@example.com\r\nSubject: Hello\r\n")
	b.WriteString("Date: Tue, 01 Dec 2026 12:00:00 +0000\r\n")
	if msgID != "" {
		b.WriteString("Message-ID: " + msgID + "\r\n")
	}
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n")
	return []byte(b.String())
}

func newMsgID() string { return "<" + rand.Text() + "@example.com>" }

// sendsOf counts the tenant's sends with this idempotency key.
func sendsOf(t *testing.T, env *sendoncetest.Env, key string) int {
	t.Helper()
	return env.QueryInt(t, `SELECT COUNT(*) FROM sends WHERE idempotency_key = ?`, key)
}

// counter reads a counter of the instance's registry: the one whose only
// label has the value label ("" for an unlabelled counter).
func counter(t *testing.T, env *sendoncetest.Env, name, label string) float64 {
	t.Helper()
	mfs, err := env.Server.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if l := m.GetLabel(); (label == "" && len(l) == 0) || (len(l) == 1 && l[0].GetValue() == label) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{%s}", name, label)
	return 0
}

// delivered waits until the send is sent and returns the relay's messages.
func delivered(t *testing.T, env *sendoncetest.Env, id string) {
	t.Helper()
	env.WaitStatus(t, id, waitLong, core.StatusSent)
}
