package dkim_test

import (
	"crypto/ed25519"
	"crypto/rsa"
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/sendonce/sendonce/internal/dkim"
)

func TestDNSRecord(t *testing.T) {
	tests := []struct {
		alg      dkim.Algorithm
		prefix   string
		nStrings int
	}{
		{dkim.RSA2048, "v=DKIM1; k=rsa; p=MIIBIjAN", 2},
		{dkim.Ed25519, "v=DKIM1; k=ed25519; p=", 1},
	}
	for _, tt := range tests {
		k := testKey(t, tt.alg)
		rec, err := k.DNSRecord("S1", "Example.COM.")
		if err != nil {
			t.Fatalf("%s: DNSRecord: %v", tt.alg, err)
		}
		if rec.Name != "s1._domainkey.example.com" || rec.Type != "TXT" || !strings.HasPrefix(rec.Value, tt.prefix) {
			t.Errorf("%s: record = %+v", tt.alg, rec)
		}
		if len(rec.Strings) != tt.nStrings || strings.Join(rec.Strings, "") != rec.Value {
			t.Errorf("%s: %d strings joining to the value? %q", tt.alg, len(rec.Strings), rec.Strings)
		}
		for _, s := range rec.Strings {
			if len(s) > 255 {
				t.Errorf("%s: string of %d bytes", tt.alg, len(s))
			}
		}
		// The zone line is valid master-file syntax carrying the same strings.
		rr, err := dns.NewRR(rec.ZoneLine())
		if err != nil {
			t.Fatalf("%s: zone line %q: %v", tt.alg, rec.ZoneLine(), err)
		}
		txt := rr.(*dns.TXT)
		if txt.Hdr.Name != "s1._domainkey.example.com." || strings.Join(txt.Txt, "") != rec.Value {
			t.Errorf("%s: zone line parses to %v", tt.alg, rr)
		}
		// The value parses back to the key.
		pk, err := dkim.ParsePublicKeyRecord(rec.Value)
		if err != nil {
			t.Fatalf("%s: ParsePublicKeyRecord: %v", tt.alg, err)
		}
		if pk.KeyType != k.Type() || pk.Bits != k.Bits() || !equalPublic(k.Public(), pk.PublicKey) {
			t.Errorf("%s: parsed record = %+v", tt.alg, pk)
		}
	}
}

func TestDNSRecordErrors(t *testing.T) {
	k := testKey(t, dkim.Ed25519)
	for _, c := range [][2]string{
		{"", "example.com"},
		{"s 1", "example.com"},
		{"s1", ""},
		{"s1", "localhost"},
		{"s1", "exa mple.com"},
		{"s1", "-bad.example.com"},
	} {
		if rec, err := k.DNSRecord(c[0], c[1]); err == nil {
			t.Errorf("DNSRecord(%q, %q) = %+v, want an error", c[0], c[1], rec)
		}
	}
	// Sub-selectors and IDNs are fine.
	rec, err := k.DNSRecord("2026.s1", "bücher.example")
	if err != nil || rec.Name != "2026.s1._domainkey.xn--bcher-kva.example" {
		t.Errorf("DNSRecord(sub-selector, IDN) = %+v, %v", rec, err)
	}
}

func TestSPFSuggestion(t *testing.T) {
	tests := []struct {
		senders []string
		want    string
	}{
		{nil, "v=spf1 mx ~all"},
		{[]string{"192.0.2.10"}, "v=spf1 ip4:192.0.2.10 ~all"},
		{[]string{"::ffff:192.0.2.10"}, "v=spf1 ip4:192.0.2.10 ~all"},
		{[]string{"2001:db8::1", "198.51.100.7/24"}, "v=spf1 ip6:2001:db8::1 ip4:198.51.100.0/24 ~all"},
		{[]string{"include:_spf.relay.example", "mx"}, "v=spf1 include:_spf.relay.example mx ~all"},
		{[]string{"smtp.relay.example"}, "v=spf1 a:smtp.relay.example ~all"},
	}
	for _, tt := range tests {
		rec, err := dkim.SPFSuggestion("example.com", tt.senders...)
		if err != nil {
			t.Errorf("SPFSuggestion(%q): %v", tt.senders, err)
			continue
		}
		if rec.Name != "example.com" || rec.Value != tt.want || !strings.Contains(rec.Note, "exactly one SPF record") {
			t.Errorf("SPFSuggestion(%q) = %+v, want value %q", tt.senders, rec, tt.want)
		}
	}
	if rec, _ := dkim.SPFSuggestion("example.com"); !strings.Contains(rec.Note, "only the domain's MX hosts") {
		t.Errorf("note without senders = %q", rec.Note)
	}
	for _, bad := range []string{"not a host!", "include:", "ip4:1.2.3.4 -all"} {
		if _, err := dkim.SPFSuggestion("example.com", bad); err == nil {
			t.Errorf("SPFSuggestion(%q) succeeded", bad)
		}
	}
}

func TestDMARCSuggestion(t *testing.T) {
	rec, err := dkim.DMARCSuggestion("Example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Name != "_dmarc.example.com" || rec.Value != "v=DMARC1; p=none; rua=mailto:dmarc-reports@example.com" || !strings.Contains(rec.Note, "p=quarantine") {
		t.Errorf("DMARCSuggestion = %+v", rec)
	}
	rec, err = dkim.DMARCSuggestion("example.com", "reports@dmarc.example.net")
	if err != nil || !strings.HasSuffix(rec.Value, "rua=mailto:reports@dmarc.example.net") {
		t.Errorf("DMARCSuggestion with address = %+v, %v", rec, err)
	}
	for _, bad := range []string{"a@b@c", "x@y.com;p=reject", "nobody"} {
		if _, err := dkim.DMARCSuggestion("example.com", bad); err == nil {
			t.Errorf("DMARCSuggestion(%q) succeeded", bad)
		}
	}
}

func TestParsePublicKeyRecord(t *testing.T) {
	ed := testKey(t, dkim.Ed25519).PublicKeyData()
	rsaKey := testKey(t, dkim.RSA2048)
	rsaP := rsaKey.PublicKeyData()
	const rsa512 = "MFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBALAojfB6Pdljuy+nOHk95doM6dIYl/dJBoqeMFwkn3gYcjjKOc4aaafeOlWWKJC3U0MMCqTnREWWnvzAzydMGi0CAwEAAQ=="
	tests := []struct {
		in   string
		want string // fmt of the interesting fields, or "error: substring"
	}{
		{"v=DKIM1; k=rsa; p=" + rsaP, "rsa 2048 revoked=false testing=false strict=false h=[] s=[]"},
		{"p=" + rsaP, "rsa 2048 revoked=false testing=false strict=false h=[] s=[]"},
		{"v=DKIM1;k=rsa;t=y:s;h=sha256;s=email;p=" + rsaP[:100] + " \t" + rsaP[100:] + ";", "rsa 2048 revoked=false testing=true strict=true h=[sha256] s=[email]"},
		{"v=DKIM1; p=" + rsa512, "rsa 512 revoked=false testing=false strict=false h=[] s=[]"},
		{"v=DKIM1; k=ed25519; p=" + ed, "ed25519 256 revoked=false testing=false strict=false h=[] s=[]"},
		{"v=DKIM1; k=rsa; p=", "rsa 0 revoked=true testing=false strict=false h=[] s=[]"},
		{"", "error: empty record"},
		{"v=DKIM2; p=" + rsaP, "error: unknown version"},
		{"k=rsa; v=DKIM1; p=" + rsaP, "error: must come first"},
		{"v=DKIM1; k=rsa", "error: no p= tag"},
		{"v=DKIM1; p=%%%", "error: not valid base64"},
		{"v=DKIM1; p=aGVsbG8=", "error: not an RSA public key"},
		{"v=DKIM1; k=ed25519; p=" + rsaP, "error: an Ed25519 key is 32 bytes"},
		{"v=DKIM1; k=dsa; p=" + rsaP, "error: unknown key type"},
		{"v=DKIM1; p=a; p=b", "error: appears twice"},
		{"v=DKIM1; garbage; p=" + rsaP, "error: has no value"},
	}
	for _, tt := range tests {
		r, err := dkim.ParsePublicKeyRecord(tt.in)
		var got string
		if err != nil {
			got = "error: " + err.Error()
			if !strings.HasPrefix(tt.want, "error: ") || !strings.Contains(got, strings.TrimPrefix(tt.want, "error: ")) {
				t.Errorf("ParsePublicKeyRecord(%.40q) = %s, want %s", tt.in, got, tt.want)
			}
			continue
		}
		got = fmt.Sprintf("%s %d revoked=%t testing=%t strict=%t h=%v s=%v", r.KeyType, r.Bits, r.Revoked, r.Testing, r.Strict, r.HashAlgorithms, r.Services)
		if got != tt.want {
			t.Errorf("ParsePublicKeyRecord(%.40q) = %s, want %s", tt.in, got, tt.want)
		}
		switch r.PublicKey.(type) {
		case *rsa.PublicKey, ed25519.PublicKey:
		case nil:
			if !r.Revoked {
				t.Errorf("ParsePublicKeyRecord(%.40q): no key", tt.in)
			}
		default:
			t.Errorf("ParsePublicKeyRecord(%.40q): key of type %T", tt.in, r.PublicKey)
		}
	}
}

// A PKCS#1 RSAPublicKey in p= is accepted too (RFC 6376 erratum 3017).
func TestParsePublicKeyRecordPKCS1(t *testing.T) {
	// The 512-bit fixture key as RSAPublicKey: the SubjectPublicKeyInfo
	// without its algorithm wrapper.
	const pkcs1 = "MEgCQQCwKI3wej3ZY7svpzh5PeXaDOnSGJf3SQaKnjBcJJ94GHI4yjnOGmmn3jpVliiQt1NDDAqk50RFlp78wM8nTBotAgMBAAE="
	r, err := dkim.ParsePublicKeyRecord("v=DKIM1; p=" + pkcs1)
	if err != nil || r.Bits != 512 {
		t.Fatalf("ParsePublicKeyRecord(PKCS#1) = %+v, %v", r, err)
	}
}
