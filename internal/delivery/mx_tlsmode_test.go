package delivery_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
	"github.com/sendonce/sendonce/internal/transport"
)

// TestMX_ShapingTLSModes: the shaping file's per-destination TLS mode —
// "required" defers mail to an exchanger without STARTTLS (the default
// delivers it in plain text), "verify" defers mail to one whose
// certificate does not verify for its name, and delivers over TLS where
// it does.
func TestMX_ShapingTLSModes(t *testing.T) {
	ca := smtptest.NewCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	selfSigned, _ := smtptest.SelfSignedTLS(t)
	plain := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.30:0"})
	port := plain.Port
	unverified := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.31:" + port, TLSConfig: selfSigned})
	verified := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.32:" + port, TLSConfig: ca.Server(t, "mx.good.test")})
	dns := dnstest.Start(t,
		"open.test. MX 10 mx.open.test.", "mx.open.test. A 127.0.0.30",
		"strict.test. MX 10 mx.strict.test.", "mx.strict.test. A 127.0.0.30",
		"picky.test. MX 10 mx.picky.test.", "mx.picky.test. A 127.0.0.31",
		"good.test. MX 10 mx.good.test.", "mx.good.test. A 127.0.0.32")
	shaping := filepath.Join(t.TempDir(), "shaping.json")
	rules := `{"rules": [{"name": "strict", "domains": ["strict.test"], "tls": "required"},
		{"name": "picky", "domains": ["picky.test", "good.test"], "tls": "verify"}]}`
	if err := os.WriteFile(shaping, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	env := sendoncetest.Start(t, sendoncetest.Options{MX: true, MXPort: port, DNSResolver: dns.Addr(), Shaping: shaping, TLSCA: caFile,
		RetryBase: 20 * time.Millisecond})

	open := send(t, env, map[string]any{"to": "ann@open.test", "subject": "s", "text": "x"})
	strict := send(t, env, map[string]any{"to": "bob@strict.test", "subject": "s", "text": "x"})
	picky := send(t, env, map[string]any{"to": "cy@picky.test", "subject": "s", "text": "x"})
	good := send(t, env, map[string]any{"to": "di@good.test", "subject": "s", "text": "x"})
	env.WaitStatus(t, open, waitLong, core.StatusDelivered)
	env.WaitStatus(t, good, waitLong, core.StatusDelivered)
	waitEvent(t, env, strict, core.EventDeliveryDelayed, 2)
	waitEvent(t, env, picky, core.EventDeliveryDelayed, 2)
	time.Sleep(settle)
	if got := messagesTo(plain); got["bob@strict.test"] != 0 || got["ann@open.test"] != 1 {
		t.Errorf("the plain exchanger got %v: want ann@ (opportunistic) and not bob@ (tls required)", got)
	}
	if n := len(unverified.Messages()); n != 0 {
		t.Errorf("the exchanger whose certificate does not verify got %d messages under tls verify", n)
	}
	if msgs := verified.Messages(); len(msgs) != 1 || !msgs[0].TLS {
		t.Errorf("the verifying exchanger got %+v, want one message over TLS", msgs)
	}
	if le := str(getSend(t, env, strict), "last_error"); !strings.Contains(le, "STARTTLS") {
		t.Errorf("tls required: last_error %q does not say why", le)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"default": {"tls": "maybe"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := transport.LoadShaping(bad); err == nil || !strings.Contains(err.Error(), "tls") {
		t.Errorf("a shaping file with tls \"maybe\" loaded: %v", err)
	}
}
