package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// DANE for SMTP (RFC 7672), opt-in (MXConfig.DANE). What applies to an
// exchanger follows from two answers of the configured resolver:
//
//   - its MX answer not validated (no AD bit): nothing changes —
//     opportunistic TLS, or what MTA-STS says;
//   - TLSA records at _PORT._tcp.HOST, validated, at least one usable
//     (DANE-TA(2) or DANE-EE(3), selector 0 or 1, matching 0, 1 or 2): TLS
//     is required and the certificate must match a record — DANE-EE by
//     the leaf alone (no name or date check, section 3.1.1), DANE-TA by
//     a chain to the matching trust anchor and the exchanger's name
//     (section 3.1.2). DANE comes before MTA-STS (RFC 8461 section 2);
//   - validated TLSA records none of which is usable: TLS is required,
//     unauthenticated (Postfix's "encrypt" level for this case);
//   - a validated "no TLSA records": nothing changes;
//   - the TLSA lookup failed: that exchanger is not used for now (a
//     temporary failure): an attacker who can make the lookup fail must
//     not get a plaintext session instead (section 2.2).

// danePolicy is what DANE asks of one exchanger; nil asks nothing.
type danePolicy struct {
	records []*dns.TLSA // the usable ones; empty: encrypt without authentication
}

// daneFor looks up what DANE asks of host (port: the SMTP port dialled).
func (m *MX) daneFor(ctx context.Context, res *mxResolver, h exchanger) (*danePolicy, error) {
	if !m.cfg.DANE || !h.secure {
		return nil, nil
	}
	name := "_" + m.cfg.Port + "._tcp." + h.host
	a, err := res.resolve(ctx, name, dns.TypeTLSA)
	if err != nil {
		return nil, fmt.Errorf("looking up TLSA records of %s: %w", h.host, err)
	}
	if !a.Secure || len(a.Records) == 0 {
		return nil, nil
	}
	p := &danePolicy{}
	for _, rr := range a.Records {
		if t, ok := rr.(*dns.TLSA); ok && usableTLSA(t) {
			p.records = append(p.records, t)
		}
	}
	return p, nil
}

func usableTLSA(t *dns.TLSA) bool {
	return (t.Usage == 2 || t.Usage == 3) && t.Selector <= 1 && t.MatchingType <= 2
}

// verify checks a session's certificates against the policy's records.
func (p *danePolicy) verify(cs tls.ConnectionState, host string) error {
	if len(p.records) == 0 {
		return nil // encrypt only: every TLSA record was unusable
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("DANE: no certificate")
	}
	leaf := cs.PeerCertificates[0]
	for _, t := range p.records {
		if t.Usage == 3 && tlsaMatches(t, leaf) {
			return nil
		}
	}
	for _, t := range p.records {
		if t.Usage != 2 {
			continue
		}
		for _, c := range cs.PeerCertificates[1:] {
			if tlsaMatches(t, c) && chainsTo(leaf, c, cs.PeerCertificates[1:], host) == nil {
				return nil
			}
		}
	}
	return fmt.Errorf("DANE: the certificate of %s matches none of its %d TLSA records", host, len(p.records))
}

// chainsTo verifies leaf for host with anchor as the only root: a
// DANE-TA record makes that certificate the trust anchor.
func chainsTo(leaf, anchor *x509.Certificate, others []*x509.Certificate, host string) error {
	roots := x509.NewCertPool()
	roots.AddCert(anchor)
	inter := x509.NewCertPool()
	for _, c := range others {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: strings.TrimSuffix(host, "."), Roots: roots, Intermediates: inter})
	return err
}

// tlsaMatches compares a certificate with a record's association data.
func tlsaMatches(t *dns.TLSA, c *x509.Certificate) bool {
	data := c.Raw
	if t.Selector == 1 {
		data = c.RawSubjectPublicKeyInfo
	}
	var sum []byte
	switch t.MatchingType {
	case 0:
		sum = data
	case 1:
		h := sha256.Sum256(data)
		sum = h[:]
	case 2:
		h := sha512.Sum512(data)
		sum = h[:]
	}
	want, err := hex.DecodeString(t.Certificate)
	return err == nil && bytes.Equal(sum, want)
}
