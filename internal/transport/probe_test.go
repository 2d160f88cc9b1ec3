package transport_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/smtptest"
	"github.com/sendonce/sendonce/internal/transport"
)

func TestProbe(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Username: "probe", Password: "s3cret-pass"})
	cfg := func(user, pass string) transport.SMTPConfig {
		return transport.SMTPConfig{Host: srv.Host, Port: srv.Port, Username: user, Password: pass, TLS: transport.TLSNone,
			DialTimeout: 5 * time.Second, CommandTimeout: 5 * time.Second}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := transport.Probe(ctx, cfg("probe", "s3cret-pass")); err != nil {
		t.Fatalf("good credentials: %v", err)
	}
	err := transport.Probe(ctx, cfg("probe", "wrong-pass"))
	var te *transport.Error
	if !errors.As(err, &te) || te.Stage != transport.StageAuth || te.Code != 535 {
		t.Fatalf("wrong password: %v, want a 535 at the auth stage", err)
	}
	if strings.Contains(err.Error(), "wrong-pass") {
		t.Fatalf("error shows the password: %v", err)
	}
	if got := len(srv.Messages()); got != 0 {
		t.Fatalf("a probe delivered %d messages", got)
	}
	closed := transport.SMTPConfig{Host: "127.0.0.1", Port: "1", TLS: transport.TLSNone, DialTimeout: 2 * time.Second}
	if err := transport.Probe(ctx, closed); err == nil || !errors.As(err, &te) || te.Stage != transport.StageDial {
		t.Fatalf("closed port: %v, want a dial error", err)
	}
}
