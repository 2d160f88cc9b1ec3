package mxserver_test

import (
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestInbound_OffersSTARTTLS: with --inbound-tls-cert the listener offers
// STARTTLS and mail sent over it is received; without, it offers none.
func TestInbound_OffersSTARTTLS(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		serverTLS, clientTLS := smtptest.SelfSignedTLS(t)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true, Inbound: true, InboundTLS: serverTLS})
		createInbox(t, env, "support@recv.test")
		c := helloRelay(t, env.InboundAddr)
		defer c.Close()
		if ok, _ := c.Extension("STARTTLS"); !ok {
			t.Fatal("the listener does not offer STARTTLS with a certificate configured")
		}
		clientTLS.ServerName = "localhost"
		tc, err := smtp.DialStartTLS(env.InboundAddr, clientTLS)
		if err != nil {
			t.Fatalf("STARTTLS: %v", err)
		}
		defer tc.Close()
		if err := tc.SendMail("alice@sender.test", []string{"support@recv.test"}, strings.NewReader(plainMail)); err != nil {
			t.Fatalf("send over TLS: %v", err)
		}
		if n := len(receivedList(t, env)); n != 1 {
			t.Fatalf("%d messages received over TLS, want 1", n)
		}

		plain := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, Inbound: true})
		c2 := helloRelay(t, plain.InboundAddr)
		defer c2.Close()
		if ok, _ := c2.Extension("STARTTLS"); ok {
			t.Fatal("STARTTLS offered without a certificate")
		}
	})
}
