package cli

import (
	"strings"

	"github.com/sendonce/sendonce/internal/server"
)

// providerFlags are the provider transports' flags (API contract section
// 15, docs/providers.md).
type providerFlags struct {
	fallbacks multiFlag
	snsHosts  multiFlag
}

func (p *providerFlags) define(e *envFlags, sc *server.Config) {
	if v, ok := e.env("SENDONCE_FALLBACK_TRANSPORT"); ok {
		p.fallbacks = strings.Fields(v) // URLs hold no spaces: space-separated
	}
	e.fs.Var(&p.fallbacks, "fallback-transport", "a transport URL tried, in the order given, only when every one before it definitely did not take the message (repeatable; env SENDONCE_FALLBACK_TRANSPORT, space-separated)")
	if v, ok := e.env("SENDONCE_SNS_CERT_HOST"); ok {
		p.snsHosts = strings.Fields(v)
	}
	e.fs.Var(&p.snsHosts, "sns-cert-host", "HOST:PORT an SNS signing certificate URL may name besides Amazon SNS's own hosts, for tests (repeatable; env SENDONCE_SNS_CERT_HOST)")
	e.str(&sc.Providers.ResendWebhookSecret, "resend-webhook-secret", "SENDONCE_RESEND_WEBHOOK_SECRET", "", "whsec_… secret of the Resend webhook posting to /v1/providers/resend/events (the route is off without it)")
}

// apply puts the parsed values into the server's config.
func (p *providerFlags) apply(sc *server.Config) error {
	sc.Providers.Fallbacks = append([]string(nil), p.fallbacks...)
	sc.Providers.SNSCertHosts = append([]string(nil), p.snsHosts...)
	tc, err := server.LoadCA(sc.TLSCA) // --tls-ca, defined with the mx flags
	if err != nil {
		return err
	}
	sc.Providers.TLS = tc
	return nil
}
