package app

import (
	"crypto/x509"

	"github.com/sendonce/sendonce/internal/dnscheck"
)

// SenderRulesConfig is what the domain check's bulk sender rules section
// needs from the server's settings.
type SenderRulesConfig struct {
	// BounceDomain (--bounce-domain) is the envelope senders' domain, the
	// one SPF is checked for; empty: the From domain is.
	BounceDomain string
	// TLSReceivers (--tls-receivers) are the receiver domains whose
	// exchangers must offer STARTTLS; empty: not checked.
	TLSReceivers []string
	// HELOName (--helo-name) is said in EHLO to them. Defaults to the
	// first egress source's, else "localhost".
	HELOName string
	// Port (--mx-port) is the port their exchangers are reached at.
	// Defaults to 25.
	Port string
	// RootCAs (--tls-ca) verify the exchangers' certificates; nil: the
	// system's.
	RootCAs *x509.CertPool
}

// senderRules completes opts with the bulk sender rules of this
// deployment: the envelope domain, the unsubscribe links' base, the
// receivers to probe through the outbound policy. sendonce signs with the
// From domain's own key, so the DKIM d= is the domain checked (the
// default). off leaves the section out.
func (s *Service) senderRules(opts *dnscheck.Options, off bool) {
	sr := s.cfg.SenderRules
	if sr.BounceDomain != "" {
		opts.EnvelopeDomain = sr.BounceDomain
	}
	if off {
		return
	}
	opts.Bulk = &dnscheck.BulkRules{
		PublicURL: s.cfg.PublicURL,
		Receivers: sr.TLSReceivers,
		Policy:    s.cfg.Outbound,
		HELOName:  sr.HELOName,
		Port:      sr.Port,
		RootCAs:   sr.RootCAs,
		Probes:    s.probes,
	}
}
