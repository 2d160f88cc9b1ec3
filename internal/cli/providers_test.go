package cli

import (
	"slices"
	"strings"
	"testing"
)

func parseProviders(t *testing.T, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	cfg := serveFlagsFrom(t, env, args...)
	_, _, err := cfg.serverConfig()
	return cfg, err
}

// --ses-sns-topic is repeatable and read from SENDONCE_SES_SNS_TOPIC; a
// value that is not an SNS topic ARN stops the start (a typo would
// otherwise refuse every message with 403).
func TestServeFlags_SESSNSTopic(t *testing.T) {
	const a, b = "arn:aws:sns:eu-west-1:123456789012:ses-events", "arn:aws-cn:sns:cn-north-1:123456789012:other"
	cfg := serveFlagsFrom(t, map[string]string{"SENDONCE_SES_SNS_TOPIC": a + " " + b})
	sc, _, err := cfg.serverConfig()
	if err != nil || !slices.Equal(sc.Providers.SESSNSTopics, []string{a, b}) {
		t.Errorf("from the environment: %v, %v", sc.Providers.SESSNSTopics, err)
	}
	cfg = serveFlagsFrom(t, nil, "--ses-sns-topic", a, "--ses-sns-topic", b)
	if sc, _, err := cfg.serverConfig(); err != nil || !slices.Equal(sc.Providers.SESSNSTopics, []string{a, b}) {
		t.Errorf("from flags: %v, %v", sc.Providers.SESSNSTopics, err)
	}
	for _, bad := range []string{"ses-events", "arn:aws:sqs:eu-west-1:123456789012:q", "arn:aws:sns:eu-west-1::ses-events", "arn:aws:sns:eu-west-1:123456789012:a:b"} {
		if _, err := parseProviders(t, nil, "--ses-sns-topic", bad); err == nil || !strings.Contains(err.Error(), "--ses-sns-topic") {
			t.Errorf("%q: %v; want an error naming the flag", bad, err)
		}
	}
}

// The Resend webhook secret is read from SENDONCE_RESEND_WEBHOOK_SECRET,
// the way the docs give (a flag shows in ps); the flag still works, with a
// warning, and the usage text never shows the secret.
func TestServeFlags_ResendSecretFromEnvironment(t *testing.T) {
	const secret = "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ="
	cfg, err := parseProviders(t, map[string]string{"SENDONCE_RESEND_WEBHOOK_SECRET": secret})
	if err != nil || cfg.Server.Providers.ResendWebhookSecret != secret || len(cfg.Providers.warnings()) != 0 {
		t.Errorf("from the environment: %q, %v, warnings %v", cfg.Server.Providers.ResendWebhookSecret, err, cfg.Providers.warnings())
	}
	cfg, err = parseProviders(t, map[string]string{"SENDONCE_RESEND_WEBHOOK_SECRET": "whsec_other"}, "--resend-webhook-secret", secret)
	w := cfg.Providers.warnings()
	if err != nil || cfg.Server.Providers.ResendWebhookSecret != secret || len(w) != 1 || !strings.Contains(w[0], "SENDONCE_RESEND_WEBHOOK_SECRET") {
		t.Errorf("from the flag: %q, %v, warnings %v", cfg.Server.Providers.ResendWebhookSecret, err, w)
	}
	var usage strings.Builder
	e := newFlags("serve", func(k string) string { return map[string]string{"SENDONCE_RESEND_WEBHOOK_SECRET": secret}[k] }, &usage)
	var c Config
	serverFlags(e, &c)
	e.fs.PrintDefaults()
	if strings.Contains(usage.String(), "c2VjcmV0") || !strings.Contains(usage.String(), "SENDONCE_RESEND_WEBHOOK_SECRET") {
		t.Errorf("usage shows the secret or not its variable")
	}
}
