package dnscheck

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/transport"
)

// DefaultProbeTimeout bounds one exchanger's connection in the TLS rule.
const DefaultProbeTimeout = 10 * time.Second

// exchanger is the address of one receiver's most preferred mail
// exchanger, as resolved through the check's resolver.
type exchanger struct {
	receiver string
	host     string
	ip       netip.Addr
}

// tlsOutcome is what one probe of an exchanger saw.
type tlsOutcome struct {
	err       error // the probe's, from connect to QUIT
	tls       bool  // STARTTLS was negotiated
	version   uint16
	verifyErr error // the certificate is not valid for the host
}

// errProbePanicked is a probe that panicked: reported as a failed
// connection, without the panic's text.
var errProbePanicked = errors.New("the probe failed unexpectedly")

// bulkTLS connects to the most preferred exchanger of each receiver
// domain, as the mx transport would (transport.Probe, through the
// outbound policy), and sees that it offers STARTTLS with a certificate
// valid for its name. Names are resolved one after another (the resolver
// is not safe for concurrent use); the connections run at once, each
// within ProbeTimeout.
func (c *checker) bulkTLS(b *BulkRules) {
	if len(b.Receivers) == 0 {
		c.rule(RuleTLS, OK, "No receiver domains are configured (--tls-receivers), so TLS to the major receivers was not checked.", "")
		return
	}
	var targets []exchanger
	for _, r := range b.Receivers[:min(len(b.Receivers), maxReceivers)] {
		if x, ok := c.exchangerOf(r); ok {
			targets = append(targets, x)
		}
	}
	outcomes := make([]tlsOutcome, len(targets))
	var wg sync.WaitGroup
	for i, x := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { // a probe's panic is its receiver's failure, not the process's
				if p := recover(); p != nil {
					outcomes[i] = tlsOutcome{err: errProbePanicked}
				}
			}()
			k := probeKey{exchanger: x, port: cmp.Or(b.Port, "25"), helo: c.heloFor(b), roots: b.RootCAs}
			outcomes[i] = b.Probes.outcome(c.ctx, k, func() tlsOutcome { return c.probeTLS(b, x, k) })
		}()
	}
	wg.Wait()
	for i, x := range targets {
		c.judgeTLS(b, x, outcomes[i])
	}
}

// exchangerOf resolves receiver's most preferred MX host to an address
// (IPv4 first); a failure is a warning finding: the check cannot judge.
func (c *checker) exchangerOf(receiver string) (exchanger, bool) {
	fix := fmt.Sprintf("Check that the resolver %s resolves %s, or remove %s from --tls-receivers.", c.r.addr, receiver, receiver)
	a, err := c.lookup(receiver, dns.TypeMX)
	if err != nil {
		c.rule(RuleTLS, Warning, fmt.Sprintf("TLS to %s was not checked: its MX lookup failed: %v.", receiver, err), fix)
		return exchanger{}, false
	}
	var mxs []*dns.MX
	for _, rr := range a.Records {
		if mx, ok := rr.(*dns.MX); ok && mx.Mx != "." {
			mxs = append(mxs, mx)
		}
	}
	if len(mxs) == 0 {
		c.rule(RuleTLS, Warning, fmt.Sprintf("TLS to %s was not checked: it has no MX record here.", receiver), fix)
		return exchanger{}, false
	}
	slices.SortStableFunc(mxs, func(x, y *dns.MX) int { return cmp.Compare(x.Preference, y.Preference) })
	host := strings.ToLower(trimDot(mxs[0].Mx))
	addrs, _, err := c.addresses(host)
	if err != nil || len(addrs) == 0 {
		why := "it has no address"
		if err != nil {
			why = err.Error()
		}
		c.rule(RuleTLS, Warning, fmt.Sprintf("TLS to %s was not checked: its exchanger %s does not resolve (%s).", receiver, host, why), fix)
		return exchanger{}, false
	}
	slices.SortStableFunc(addrs, func(x, y netip.Addr) int { return cmp.Compare(x.BitLen(), y.BitLen()) })
	return exchanger{receiver: receiver, host: host, ip: addrs[0]}, true
}

// probeTLS says EHLO to x and, when offered, STARTTLS, then QUIT; it
// sends no mail. The certificate is verified here rather than in the
// handshake, so that an invalid one is reported as such and not as a
// failed connection.
func (c *checker) probeTLS(b *BulkRules, x exchanger, k probeKey) tlsOutcome {
	var out tlsOutcome
	var mu sync.Mutex // VerifyConnection runs inside the probe; read after it
	tc := &tls.Config{ServerName: x.host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			mu.Lock()
			defer mu.Unlock()
			out.tls, out.version = true, cs.Version
			out.verifyErr = verifyPeer(cs, x.host, b.RootCAs)
			return nil
		}}
	timeout := cmp.Or(b.ProbeTimeout, DefaultProbeTimeout)
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	err := transport.Probe(ctx, transport.SMTPConfig{
		Host: x.ip.String(), Port: k.port, TLS: transport.TLSOpportunistic, TLSConfig: tc,
		HELOName: k.helo, DialContext: b.Policy.DialContext, DialTimeout: timeout, CommandTimeout: timeout,
	})
	mu.Lock()
	defer mu.Unlock()
	out.err = err
	return out
}

// heloFor is the name said in EHLO: b's, else the first egress
// source's ("" lets the probe say its default).
func (c *checker) heloFor(b *BulkRules) string {
	if b.HELOName == "" && len(c.opts.Egress) > 0 {
		return c.opts.Egress[0].EHLO
	}
	return b.HELOName
}

// verifyPeer checks the chain against roots (nil: the system's) and the
// leaf against host.
func verifyPeer(cs tls.ConnectionState, host string, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("no certificate")
	}
	inter := x509.NewCertPool()
	for _, cert := range cs.PeerCertificates[1:] {
		inter.AddCert(cert)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: inter})
	return err
}

func (c *checker) judgeTLS(b *BulkRules, x exchanger, o tlsOutcome) {
	where := fmt.Sprintf("%s's exchanger %s (%s)", x.receiver, x.host, x.ip)
	var te *transport.Error
	reached := errors.As(o.err, &te) && te.Reached
	switch {
	case o.err != nil && errors.Is(o.err, netpolicy.ErrBlocked):
		c.rule(RuleTLS, Warning, fmt.Sprintf("TLS to %s was not checked: the outbound policy does not allow connecting to %s.", x.receiver, x.ip),
			"Allow the address with --outbound-allow, or check from a host that may connect to it.")
	case o.err != nil && !reached && !o.tls:
		c.rule(RuleTLS, Warning, fmt.Sprintf("TLS to %s was not checked: connecting to %s failed (%s).", x.receiver, where, netpolicy.Describe(o.err)),
			"Make sure this host may connect out to port 25 (many cloud providers block it until asked), then run the check again.")
	case !o.tls && o.err != nil && te != nil && te.Stage != transport.StageTLS:
		c.rule(RuleTLS, Warning, fmt.Sprintf("TLS to %s was not checked: %s ended the session at %s, before STARTTLS.", x.receiver, where, te.Stage),
			"Run the check again later; if it persists, see whether the receiver refuses this host's address.")
	case !o.tls && o.err != nil:
		c.rule(RuleTLS, Error, fmt.Sprintf("STARTTLS with %s failed (%s), so mail to %s would go without TLS or not at all.", where, netpolicy.Describe(o.err), x.receiver),
			"Check that nothing between this host and the receivers (a firewall, a proxy) interferes with STARTTLS, and that the system's TLS settings allow TLS 1.2 or later.")
	case !o.tls:
		c.rule(RuleTLS, Error, fmt.Sprintf("%s did not offer STARTTLS, so mail to %s would go in plain text, which the receivers' rules forbid.", where, x.receiver),
			"Check that nothing between this host and the receivers (a firewall or proxy that strips STARTTLS) tampers with SMTP.")
	case o.verifyErr != nil:
		c.rule(RuleTLS, Error, fmt.Sprintf("%s offered STARTTLS with a certificate that is not valid for %s (%s).", where, x.host, verifyClass(o.verifyErr)),
			"Check that nothing between this host and the receivers intercepts TLS, and that the system's CA certificates are current.")
	default:
		c.rule(RuleTLS, OK, fmt.Sprintf("%s offers STARTTLS (%s) with a certificate valid for its name.", where, tls.VersionName(o.version)), "")
	}
}

// verifyClass names why a certificate did not verify, in words.
func verifyClass(err error) string {
	var host x509.HostnameError
	var auth x509.UnknownAuthorityError
	var inv x509.CertificateInvalidError
	switch {
	case errors.As(err, &host):
		return "it names other hosts"
	case errors.As(err, &auth):
		return "signed by an unknown authority"
	case errors.As(err, &inv):
		return "expired or not valid for this use"
	}
	return "it does not verify"
}
