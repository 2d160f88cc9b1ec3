package dkim

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"

	"github.com/sendonce/sendonce/internal/dnsresolve"
)

// maxStringLen is the longest DNS character-string (RFC 1035 section
// 3.3): a longer TXT value is published as several strings, which receivers
// join.
const maxStringLen = 255

// Record is a DNS record to publish.
type Record struct {
	// Name is the owner name, fully qualified without the final dot, for
	// example "s1._domainkey.example.com".
	Name string `json:"name"`
	Type string `json:"type"` // always "TXT"
	// Value is the text as receivers read it, the strings joined.
	Value string `json:"value"`
	// Strings is Value cut into character-strings of at most 255 bytes,
	// the form a zone file or a DNS provider's API wants for long values.
	Strings []string `json:"strings"`
	// Note, when set, says what to check or change before publishing.
	Note string `json:"note,omitempty"`
}

// ZoneLine renders the record as a master-file line with a TTL of one
// hour, for example
//
//	s1._domainkey.example.com. 3600 IN TXT "v=DKIM1; k=rsa; p=MIIB…" "…"
func (r Record) ZoneLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s. 3600 IN %s", r.Name, r.Type)
	if len(r.Strings) == 0 { // not a TXT record: the value as it is (an MX's "10 host.")
		b.WriteString(" " + r.Value)
	}
	for _, s := range r.Strings {
		b.WriteString(` "`)
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s))
		b.WriteString(`"`)
	}
	return b.String()
}

func txtRecord(name, value, note string) Record {
	var parts []string
	for s := value; ; {
		n := min(len(s), maxStringLen)
		parts = append(parts, s[:n])
		s = s[n:]
		if s == "" {
			break
		}
	}
	return Record{Name: name, Type: "TXT", Value: value, Strings: parts, Note: note}
}

// DNSRecord returns the DKIM key record to publish for selector at domain:
// name "<selector>._domainkey.<domain>", value "v=DKIM1; k=rsa; p=…" (or
// k=ed25519). An RSA-2048 value is about 400 bytes, hence two strings.
func (k *Key) DNSRecord(selector, domain string) (Record, error) {
	d, err := normalizeDomain(domain)
	if err != nil {
		return Record{}, err
	}
	if err := checkSelector(selector); err != nil {
		return Record{}, err
	}
	value := fmt.Sprintf("v=DKIM1; k=%s; p=%s", k.Type(), k.PublicKeyData())
	return txtRecord(strings.ToLower(selector)+"._domainkey."+d, value, ""), nil
}

// SPFSuggestion returns an SPF record for domain that authorizes senders
// and soft-fails everything else ("~all", which with DMARC in place is the
// usual choice: DMARC, not SPF alone, decides the fate of failing mail).
//
// Each sender is an IP address ("192.0.2.10" becomes ip4:192.0.2.10), a
// prefix ("2001:db8::/32" becomes ip6:2001:db8::/32), a host name (becomes
// a:host), or an SPF mechanism kept as given ("include:_spf.relay.example",
// "mx", "ip4:…"). Without senders the record authorizes the domain's MX
// hosts, and the note says to add the real sending hosts. The note always
// reminds that a domain must have exactly one SPF record.
func SPFSuggestion(domain string, senders ...string) (Record, error) {
	d, err := normalizeDomain(domain)
	if err != nil {
		return Record{}, err
	}
	terms := []string{"v=spf1"}
	for _, s := range senders {
		term, err := spfTerm(s)
		if err != nil {
			return Record{}, err
		}
		terms = append(terms, term)
	}
	note := fmt.Sprintf("A domain must have exactly one SPF record: if %s already has a v=spf1 record, add these mechanisms to it instead of publishing a second one.", d)
	if len(senders) == 0 {
		terms = append(terms, "mx")
		note = "This authorizes only the domain's MX hosts: add the address of the host that sends (ip4:…) or your relay's include: mechanism. " + note
	}
	terms = append(terms, "~all")
	return txtRecord(d, strings.Join(terms, " "), note), nil
}

func spfTerm(s string) (string, error) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Is4() || a.Is4In6() {
			return "ip4:" + a.Unmap().String(), nil
		}
		return "ip6:" + a.String(), nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Addr().Is4() {
			return "ip4:" + p.Masked().String(), nil
		}
		return "ip6:" + p.Masked().String(), nil
	}
	lower := strings.ToLower(s)
	for _, m := range []string{"ip4:", "ip6:", "include:", "a:", "mx:", "exists:"} {
		if strings.HasPrefix(lower, m) && len(s) > len(m) && !strings.ContainsAny(s, " \t\"") {
			return s, nil
		}
	}
	if lower == "a" || lower == "mx" {
		return lower, nil
	}
	if h, err := normalizeDomain(s); err == nil {
		return "a:" + h, nil
	}
	return "", fmt.Errorf("dkim: SPF sender %q is neither an address, a prefix, a host name nor an SPF mechanism", s)
}

// DMARCSuggestion returns a DMARC record for domain at _dmarc.<domain>:
// "v=DMARC1; p=none; rua=mailto:<reportTo>", a monitoring policy that
// breaks nothing while the aggregate reports show whether all mail passes.
// reportTo defaults to dmarc-reports@<domain>. The note says how to
// tighten the policy afterwards.
func DMARCSuggestion(domain, reportTo string) (Record, error) {
	d, err := normalizeDomain(domain)
	if err != nil {
		return Record{}, err
	}
	if reportTo == "" {
		reportTo = "dmarc-reports@" + d
	}
	if strings.ContainsAny(reportTo, " ;,!\"<>") || strings.Count(reportTo, "@") != 1 {
		return Record{}, fmt.Errorf("dkim: DMARC report address %q is not a bare address", reportTo)
	}
	value := "v=DMARC1; p=none; rua=mailto:" + reportTo
	note := fmt.Sprintf("Make sure %s receives mail. Once the aggregate reports show that all your mail passes DKIM or SPF in alignment, raise the policy to p=quarantine, then p=reject.", reportTo)
	return txtRecord("_dmarc."+d, value, note), nil
}

// PublicKeyRecord is a parsed DKIM key record (RFC 6376 section 3.6.1).
type PublicKeyRecord struct {
	Version string // the v= tag, "" when absent (it is optional)
	KeyType string // the k= tag, lower case; "rsa" when absent
	// PublicKey is *rsa.PublicKey or ed25519.PublicKey, nil when revoked.
	PublicKey crypto.PublicKey
	Bits      int  // RSA modulus size; 256 for Ed25519; 0 when revoked
	Revoked   bool // p= is empty: the key was withdrawn
	Testing   bool // t=y: receivers may treat signatures as unsigned
	Strict    bool // t=s: the i= domain must equal d=
	// HashAlgorithms is the h= list (lower case), nil when absent (all).
	HashAlgorithms []string
	// Services is the s= list (lower case), nil when absent (all).
	Services []string
}

// ParsePublicKeyRecord parses the text of a DKIM key record (TXT strings
// already joined). It accepts RSA keys as SubjectPublicKeyInfo or, per
// erratum 3017, RSAPublicKey, and judges no key size: the caller does.
func ParsePublicKeyRecord(txt string) (*PublicKeyRecord, error) {
	tags, order, err := parseTagList(txt)
	if err != nil {
		return nil, err
	}
	r := &PublicKeyRecord{KeyType: "rsa"}
	if v, ok := tags["v"]; ok {
		if order[0] != "v" {
			return nil, errors.New("the v= tag must come first")
		}
		if v != "DKIM1" {
			return nil, fmt.Errorf("unknown version v=%s (want DKIM1)", v)
		}
		r.Version = v
	}
	if k, ok := tags["k"]; ok {
		r.KeyType = strings.ToLower(k)
	}
	if h, ok := tags["h"]; ok {
		r.HashAlgorithms = splitColonList(h)
	}
	if s, ok := tags["s"]; ok {
		r.Services = splitColonList(s)
	}
	if t, ok := tags["t"]; ok {
		for _, f := range splitColonList(t) {
			switch f {
			case "y":
				r.Testing = true
			case "s":
				r.Strict = true
			}
		}
	}
	p, ok := tags["p"]
	if !ok {
		return nil, errors.New("no p= tag (public key)")
	}
	p = strings.Join(strings.Fields(p), "")
	if p == "" {
		r.Revoked = true
		return r, nil
	}
	der, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		return nil, errors.New("the p= tag is not valid base64")
	}
	switch r.KeyType {
	case "rsa":
		pub, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			pub, err = x509.ParsePKCS1PublicKey(der)
			if err != nil {
				return nil, errors.New("the p= tag is not an RSA public key")
			}
		}
		rp, ok := pub.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("k=rsa but p= holds a %T", pub)
		}
		r.PublicKey, r.Bits = rp, rp.N.BitLen()
	case "ed25519":
		if len(der) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("an Ed25519 key is %d bytes, p= has %d", ed25519.PublicKeySize, len(der))
		}
		r.PublicKey, r.Bits = ed25519.PublicKey(der), 256
	default:
		return nil, fmt.Errorf("unknown key type k=%s (want rsa or ed25519)", r.KeyType)
	}
	return r, nil
}

// parseTagList parses an RFC 6376 section 3.2 tag list. Tag names are
// case-sensitive; values are trimmed.
func parseTagList(s string) (map[string]string, []string, error) {
	tags := make(map[string]string)
	var order []string
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue // a trailing ";" is allowed
		}
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return nil, nil, fmt.Errorf("tag %q has no value", part)
		}
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, nil, fmt.Errorf("tag %q has no name", part)
		}
		if _, dup := tags[name]; dup {
			return nil, nil, fmt.Errorf("tag %s= appears twice", name)
		}
		tags[name] = strings.TrimSpace(value)
		order = append(order, name)
	}
	if len(order) == 0 {
		return nil, nil, errors.New("empty record")
	}
	return tags, order, nil
}

func splitColonList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ":") {
		if f = strings.ToLower(strings.TrimSpace(f)); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// normalizeDomain returns the lower-case A-label form of a host name
// without its final dot, or an error for something that is not one.
func normalizeDomain(s string) (string, error) {
	d := strings.TrimSuffix(strings.TrimSpace(s), ".")
	if d == "" {
		return "", errors.New("dkim: empty domain")
	}
	a, err := idna.Lookup.ToASCII(d)
	if err != nil {
		return "", fmt.Errorf("dkim: invalid domain %q: %w", s, err)
	}
	a = strings.ToLower(a)
	if len(a) > 253 || !strings.Contains(a, ".") {
		return "", fmt.Errorf("dkim: invalid domain %q: want a fully qualified name such as example.com", s)
	}
	for _, label := range strings.Split(a, ".") {
		if !dnsresolve.ValidLabel(label) {
			return "", fmt.Errorf("dkim: invalid domain %q", s)
		}
	}
	return a, nil
}

// checkSelector allows one or more dot-separated labels of letters,
// digits and hyphens (RFC 6376 section 3.1).
func checkSelector(s string) error {
	if s == "" {
		return errors.New("dkim: empty selector")
	}
	for _, label := range strings.Split(s, ".") {
		if !dnsresolve.ValidLabel(label) {
			return fmt.Errorf("dkim: invalid selector %q: use letters, digits and hyphens", s)
		}
	}
	return nil
}
