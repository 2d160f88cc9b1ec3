package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/server"
)

// providerFlags are the provider transports' flags (API contract section
// 15, docs/providers.md).
type providerFlags struct {
	fallbacks multiFlag
	snsHosts  multiFlag
	snsTopics multiFlag
	// secretInArgs: --resend-webhook-secret was given on the command
	// line, where every user of the host can read it (ps).
	secretInArgs bool
}

// secretFlag is a secret's flag: it notes being given on the command line.
type secretFlag struct {
	p      *string
	inArgs *bool
}

func (s secretFlag) String() string {
	if s.p == nil || *s.p == "" {
		return ""
	}
	return "(set)" // never the secret: flag usage prints defaults
}

func (s secretFlag) Set(v string) error { *s.p, *s.inArgs = v, true; return nil }

func (p *providerFlags) define(e *envFlags, sc *server.Config) {
	if v, ok := e.env("SENDONCE_FALLBACK_TRANSPORT"); ok {
		p.fallbacks = strings.Fields(v) // URLs hold no spaces: space-separated
	}
	e.fs.Var(&p.fallbacks, "fallback-transport", "a transport URL tried, in the order given, only when every one before it definitely did not take the message (repeatable; env SENDONCE_FALLBACK_TRANSPORT, space-separated)")
	if v, ok := e.env("SENDONCE_SNS_CERT_HOST"); ok {
		p.snsHosts = strings.Fields(v)
	}
	e.fs.Var(&p.snsHosts, "sns-cert-host", "HOST:PORT an SNS signing certificate URL may name besides Amazon SNS's own hosts, for tests (repeatable; env SENDONCE_SNS_CERT_HOST)")
	if v, ok := e.env("SENDONCE_SES_SNS_TOPIC"); ok {
		p.snsTopics = strings.Fields(v)
	}
	e.fs.Var(&p.snsTopics, "ses-sns-topic", "ARN of an SNS topic whose messages POST /v1/providers/ses/events takes; the only topics taken, the route is off without one (repeatable; env SENDONCE_SES_SNS_TOPIC, space-separated)")
	sc.Providers.ResendWebhookSecret, _ = e.env("SENDONCE_RESEND_WEBHOOK_SECRET")
	e.fs.Var(secretFlag{p: &sc.Providers.ResendWebhookSecret, inArgs: &p.secretInArgs}, "resend-webhook-secret",
		"whsec_… secret of the Resend webhook posting to /v1/providers/resend/events (the route is off without it); set it as env SENDONCE_RESEND_WEBHOOK_SECRET: a flag shows in ps")
}

// warnings are what serve logs about these flags once it has a logger.
func (p *providerFlags) warnings() []string {
	if p.secretInArgs {
		return []string{"--resend-webhook-secret on the command line is visible to every user of this host (ps, /proc); set SENDONCE_RESEND_WEBHOOK_SECRET instead"}
	}
	return nil
}

// apply puts the parsed values into the server's config.
func (p *providerFlags) apply(sc *server.Config) error {
	sc.Providers.Fallbacks = append([]string(nil), p.fallbacks...)
	sc.Providers.SNSCertHosts = append([]string(nil), p.snsHosts...)
	for _, arn := range p.snsTopics {
		// arn:PARTITION:sns:REGION:ACCOUNT:NAME — a typo would leave the
		// route refusing every message with 403, so say so at start.
		if f := strings.Split(arn, ":"); len(f) != 6 || f[0] != "arn" || f[2] != "sns" || slices.Contains(f, "") {
			return fmt.Errorf("--ses-sns-topic %q: not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", arn)
		}
	}
	sc.Providers.SESSNSTopics = append([]string(nil), p.snsTopics...)
	tc, err := server.LoadCA(sc.TLSCA) // --tls-ca, defined with the mx flags
	if err != nil {
		return err
	}
	sc.Providers.TLS = tc
	return nil
}
