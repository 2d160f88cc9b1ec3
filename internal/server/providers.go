package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/sns"
)

// ProvidersConfig is what provider transports and their intake routes need
// (API contract section 15).
type ProvidersConfig struct {
	// Fallbacks is --fallback-transport, in order.
	Fallbacks []string
	// ResendWebhookSecret is --resend-webhook-secret ("whsec_…"): POST
	// /v1/providers/resend/events is refused without it.
	ResendWebhookSecret string
	// SNSCertHosts is --sns-cert-host: HOST:PORT values a signing
	// certificate URL may name besides Amazon SNS's own hosts (tests).
	SNSCertHosts []string
	// SESSNSTopics is --ses-sns-topic: the ARNs of the only SNS topics
	// whose messages POST /v1/providers/ses/events takes; none turns the
	// route off (404).
	SESSNSTopics []string
	// TLS adds trusted roots (--tls-ca) for provider APIs and SNS
	// certificate fetches; nil: the system's roots.
	TLS *tls.Config
}

// LoadCA reads a PEM file of certificates (--tls-ca) into a TLS
// configuration trusting them besides the system's roots.
func LoadCA(path string) (*tls.Config, error) {
	if path == "" {
		return nil, nil
	}
	pool, err := caPool(path)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// caPool is the system's roots and the PEM certificates of the file at
// path (--tls-ca).
func caPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// intakeConfig is the provider intake routes' settings: SNS certificates
// and subscription confirmations are fetched through the outbound policy
// (a certificate host is public unless --sns-cert-host names another and
// --outbound-allow lets it be reached), with --tls-ca's roots.
func intakeConfig(cfg Config, policy *netpolicy.Policy) kit.ProvidersConfig {
	tr := policy.HTTPTransport()
	if cfg.Providers.TLS != nil {
		tr.TLSClientConfig = cfg.Providers.TLS.Clone()
	}
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	pc := kit.ProvidersConfig{ResendSecret: cfg.Providers.ResendWebhookSecret}
	if len(cfg.Providers.SESSNSTopics) > 0 {
		// Without named topics any AWS account could subscribe the
		// route and publish events: it stays off.
		pc.SNS = sns.New(client, cfg.Providers.SNSCertHosts, cfg.Now)
		pc.SNSTopics = append([]string(nil), cfg.Providers.SESSNSTopics...)
	}
	return pc
}
