package transport

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"testing"

	"github.com/miekg/dns"

	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

func tlsaRecord(usage, selector, matching uint8, c *x509.Certificate) *dns.TLSA {
	data := c.Raw
	if selector == 1 {
		data = c.RawSubjectPublicKeyInfo
	}
	switch matching {
	case 1:
		s := sha256.Sum256(data)
		data = s[:]
	case 2:
		s := sha512.Sum512(data)
		data = s[:]
	}
	return &dns.TLSA{Usage: usage, Selector: selector, MatchingType: matching, Certificate: hex.EncodeToString(data)}
}

// TestDANE_Verify holds danePolicy.verify to RFC 7672 section 3.1: a
// DANE-EE record matches the leaf alone (whatever its name), a DANE-TA
// record makes a certificate of the chain the only root and the name must
// then match; nothing else passes.
func TestDANE_Verify(t *testing.T) {
	ca := smtptest.NewCA(t)
	block, _ := pem.Decode(ca.PEM)
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(ca.Server(t, "mx.ta.test").Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := smtptest.SelfSignedTLS(t)
	strangerLeaf, _ := x509.ParseCertificate(stranger.Certificates[0].Certificate[0])
	chain := tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf, caCert}}

	cases := []struct {
		name    string
		records []*dns.TLSA
		cs      tls.ConnectionState
		host    string
		ok      bool
	}{
		{"EE spki sha256", []*dns.TLSA{tlsaRecord(3, 1, 1, leaf)}, chain, "other.name", true},
		{"EE full cert sha512", []*dns.TLSA{tlsaRecord(3, 0, 2, leaf)}, chain, "mx.ta.test", true},
		{"EE exact spki", []*dns.TLSA{tlsaRecord(3, 1, 0, leaf)}, chain, "mx.ta.test", true},
		{"EE of another key", []*dns.TLSA{tlsaRecord(3, 1, 1, strangerLeaf)}, chain, "mx.ta.test", false},
		{"TA and the name", []*dns.TLSA{tlsaRecord(2, 0, 1, caCert)}, chain, "mx.ta.test", true},
		{"TA but another name", []*dns.TLSA{tlsaRecord(2, 0, 1, caCert)}, chain, "mx.other.test", false},
		{"TA not sent in the chain", []*dns.TLSA{tlsaRecord(2, 0, 1, caCert)},
			tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}, "mx.ta.test", false},
		{"TA record naming the leaf", []*dns.TLSA{tlsaRecord(2, 1, 1, leaf)}, chain, "mx.ta.test", false},
		{"no certificate", []*dns.TLSA{tlsaRecord(3, 1, 1, leaf)}, tls.ConnectionState{}, "mx.ta.test", false},
	}
	for _, c := range cases {
		err := (&danePolicy{records: c.records}).verify(c.cs, c.host)
		if (err == nil) != c.ok {
			t.Errorf("%s: verify = %v, want ok=%v", c.name, err, c.ok)
		}
	}
	// PKIX usages (0, 1) and unknown parameters are unusable for SMTP.
	for _, r := range []*dns.TLSA{{Usage: 0}, {Usage: 1}, {Usage: 3, Selector: 2}, {Usage: 3, MatchingType: 3}} {
		if usableTLSA(r) {
			t.Errorf("record %d %d %d counted as usable", r.Usage, r.Selector, r.MatchingType)
		}
	}
}
