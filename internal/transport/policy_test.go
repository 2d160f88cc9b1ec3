package transport_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
	"github.com/sendonce/sendonce/internal/transport"
)

// TestMXDeliverRefusesMappedLoopback: exchangers whose AAAA records are
// IPv4-mapped forms of loopback or of the unspecified address (which
// connects to the local host) must not be dialled by default. Before the
// outbound policy, ::ffff:0.0.0.0 passed the loopback guard and reached the
// SMTP server on 127.0.0.1.
func TestMXDeliverRefusesMappedLoopback(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	dnsSrv := dnstest.Start(t,
		"unspec.test. MX 10 mx.unspec.test.", "mx.unspec.test. AAAA ::ffff:0.0.0.0",
		"mapped.test. MX 10 mx.mapped.test.", "mx.mapped.test. AAAA ::ffff:127.0.0.1",
		"compat.test. MX 10 mx.compat.test.", "mx.compat.test. AAAA ::127.0.0.1",
		"private.test. MX 10 mx.private.test.", "mx.private.test. A 127.0.0.2",
	)
	for _, rcpt := range []string{"u@unspec.test", "u@mapped.test", "u@compat.test", "u@private.test"} {
		cfg := mxConfig(dnsSrv)
		cfg.Port = srv.Port
		te := mxDeliverErr(t, context.Background(), cfg, []string{rcpt}, "policy@sendonce.test")
		mxCheckErr(t, te, transport.Permanent, transport.StageResolve, 0)
	}
	if n := srv.Connections(); n != 0 {
		t.Errorf("the SMTP server on loopback got %d connections", n)
	}
}

// TestSMTPDialThroughPolicy: a relay a tenant configured dials through the
// policy, which refuses loopback whatever the name resolves to; the
// failure is Permanent at the dial stage and the server sees nothing.
func TestSMTPDialThroughPolicy(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	cfg := transport.SMTPConfig{Host: "127.0.0.1", Port: srv.Port, TLS: transport.TLSNone, DialContext: netpolicy.MustParse("").DialContext}
	err := transport.NewSMTP(cfg).Deliver(context.Background(), transport.Envelope{From: "a@sendonce.test", To: []string{"b@example.test"}}, mxMessage("relay-policy@sendonce.test"))
	var te *transport.Error
	if !errors.As(err, &te) || te.Class != transport.Permanent || te.Stage != transport.StageDial || !errors.Is(err, netpolicy.ErrBlocked) {
		t.Fatalf("Deliver = %v, want a Permanent dial failure blocked by the policy", err)
	}
	if err := transport.Probe(context.Background(), cfg); !errors.Is(err, netpolicy.ErrBlocked) {
		t.Fatalf("Probe = %v, want blocked", err)
	}
	if n := srv.Connections(); n != 0 {
		t.Errorf("the relay got %d connections", n)
	}
	cfg.DialContext = netpolicy.MustParse("private").DialContext
	if err := transport.NewSMTP(cfg).Deliver(context.Background(), transport.Envelope{From: "a@sendonce.test", To: []string{"b@example.test"}}, mxMessage("relay-policy2@sendonce.test")); err != nil {
		t.Fatalf("with private allowed: %v", err)
	}
}
