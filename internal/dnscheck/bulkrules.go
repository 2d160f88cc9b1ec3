package dnscheck

import (
	"crypto/x509"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/netpolicy"
)

// CheckBulk is the section of the sender rules Gmail, Yahoo and Microsoft
// enforce on bulk senders; its findings name their rule (Finding.Rule).
const CheckBulk = "bulk"

// The bulk sender rules, as Finding.Rule of CheckBulk findings.
const (
	// RuleSPF: the envelope sender's domain (the SPF domain) publishes a
	// usable SPF record.
	RuleSPF = "spf"
	// RuleDKIM: the mail is DKIM-signed with a key that is published.
	RuleDKIM = "dkim"
	// RuleAlignment: the From domain aligns, under DMARC, with the SPF
	// domain or the DKIM d= (both, ideally).
	RuleAlignment = "alignment"
	// RuleDMARC: a DMARC record is published (p=none at least).
	RuleDMARC = "dmarc"
	// RulePTR: each egress source has forward-confirmed reverse DNS.
	RulePTR = "ptr"
	// RuleTLS: the major receivers' exchangers take the mail over TLS.
	RuleTLS = "tls"
	// RuleOneClick: bulk mail carries an RFC 8058 one-click unsubscribe
	// link receivers can reach.
	RuleOneClick = "one-click"
)

// DefaultReceivers are the receiver domains whose exchangers the TLS rule
// connects to by default (--tls-receivers): the providers that publish
// the bulk sender rules.
const DefaultReceivers = "gmail.com,yahoo.com,outlook.com"

// maxReceivers bounds the receiver domains one check connects to.
const maxReceivers = 10

// BulkRules configures the bulk sender rules section (Options.Bulk).
type BulkRules struct {
	// DKIMDomain is the d= sendonce signs the domain's mail with.
	// Defaults to Options.Domain: sendonce signs with the From domain's
	// own key.
	DKIMDomain string
	// PublicURL is the base of the one-click unsubscribe links
	// (--public-url). Empty: not set, so the links would not be https.
	PublicURL string
	// Receivers are the receiver domains whose exchangers must offer
	// STARTTLS with a certificate valid for their name (ParseReceivers;
	// at most 10). Empty: the TLS rule is not checked.
	Receivers []string
	// Policy judges every address the TLS rule connects to
	// (--outbound-allow); nil allows global unicast addresses only.
	Policy *netpolicy.Policy
	// Port is the exchangers' SMTP port. Defaults to "25"; tests use
	// another.
	Port string
	// RootCAs verify the exchangers' certificates. nil: the system's.
	RootCAs *x509.CertPool
	// HELOName is said in EHLO. Defaults to the first egress source's
	// EHLO name, else "localhost".
	HELOName string
	// ProbeTimeout bounds each exchanger's connection, from connect to
	// QUIT. Defaults to 10 seconds; the check's Timeout bounds all.
	ProbeTimeout time.Duration
	// Probes keeps the probes' outcomes between checks (a process's one
	// NewProbeCache); nil: every check probes.
	Probes *ProbeCache
}

// ParseReceivers reads a comma-separated list of receiver domains
// (--tls-receivers); "none" or "" is no receiver.
func ParseReceivers(s string) ([]string, error) {
	if strings.EqualFold(strings.TrimSpace(s), "none") {
		return nil, nil
	}
	var out []string
	for _, item := range strings.Split(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		d, err := normalizeDomain(item)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	if len(out) > maxReceivers {
		return nil, fmt.Errorf("dnscheck: %d receiver domains; at most %d", len(out), maxReceivers)
	}
	return out, nil
}

// rule appends a finding of the bulk section.
func (c *checker) rule(rule string, level Level, msg, fix string) {
	if level == OK {
		fix = ""
	}
	c.rep.Findings = append(c.rep.Findings, Finding{Check: CheckBulk, Rule: rule, Level: level, Message: msg, Fix: fix})
}

// checkBulk judges the domain by the bulk sender rules, reusing what the
// other checks found (their lookups are cached) rather than asking again.
func (c *checker) checkBulk(b *BulkRules) {
	dkimDomain := c.domain
	if b.DKIMDomain != "" {
		d, err := normalizeDomain(b.DKIMDomain)
		if err != nil {
			c.rule(RuleDKIM, Error, fmt.Sprintf("The DKIM signing domain %q is not a domain name.", b.DKIMDomain), "Sign with d= a domain name.")
			return
		}
		dkimDomain = d
	}
	c.bulkSPF()
	c.bulkDKIM(dkimDomain)
	c.bulkDMARC(dkimDomain)
	c.bulkPTR()
	c.bulkTLS(b)
	c.bulkOneClick(b.PublicURL)
}

// bulkSPF: the receivers want SPF to pass for the envelope sender's
// domain, which is the From domain or --bounce-domain.
func (c *checker) bulkSPF() {
	env := c.envDomain
	if env == c.domain {
		if n := c.count(CheckSPF, Error); n > 0 {
			c.rule(RuleSPF, Error, fmt.Sprintf("SPF for %s, the envelope sender's domain, has %s (see SPF above), so SPF does not pass.", env, plural(n, "error", "errors")),
				"Fix the SPF errors reported above.")
			return
		}
		c.rule(RuleSPF, OK, fmt.Sprintf("%s, the envelope sender's domain, publishes a usable SPF record (see SPF above).", env), "")
		return
	}
	f := c.fetchSPF(env)
	switch {
	case f.err != nil:
		c.rule(RuleSPF, Error, fmt.Sprintf("The SPF record of %s, the envelope sender's domain (--bounce-domain), could not be read: %v.", env, f.err),
			"Check that the resolver answers and run the check again.")
	case len(f.records) == 0:
		c.rule(RuleSPF, Error, fmt.Sprintf("%s, the envelope sender's domain (--bounce-domain), has no SPF record, so SPF cannot pass for the mail.", env),
			fmt.Sprintf("Publish one TXT record at %s listing the addresses mail leaves from, such as \"v=spf1 ip4:<sending IP> -all\".", env))
	case len(f.records) > 1:
		c.rule(RuleSPF, Error, fmt.Sprintf("%s, the envelope sender's domain, has %d SPF records: a permanent error for receivers.", env, len(f.records)),
			"Merge them into a single v=spf1 record.")
	case len(f.syntax) > 0:
		c.rule(RuleSPF, Error, fmt.Sprintf("The SPF record of %s, the envelope sender's domain, has a syntax error: %s.", env, f.syntax[0]),
			"Correct the record (RFC 7208 section 5).")
	default:
		c.rule(RuleSPF, OK, fmt.Sprintf("%s, the envelope sender's domain (--bounce-domain), publishes an SPF record: %q.", env, f.records[0]), "")
	}
}

// bulkDKIM: the receivers want every message DKIM-signed with a key they
// find.
func (c *checker) bulkDKIM(d string) {
	switch {
	case c.selector == "":
		c.rule(RuleDKIM, Warning, "No DKIM selector was given, so whether the mail's signature verifies was not checked.",
			"Run the check with the selector the domain signs with.")
	case c.count(CheckDKIM, Error) > 0:
		c.rule(RuleDKIM, Error, fmt.Sprintf("DKIM signatures with selector %s do not verify (see DKIM above): the receivers require DKIM of bulk senders.", c.selector),
			"Fix the DKIM errors reported above.")
	default:
		c.rule(RuleDKIM, OK, fmt.Sprintf("Mail is signed with d=%s, selector %s, whose key is published.", d, c.selector), "")
	}
}

// bulkDMARC: a DMARC record published (p=none is enough for the rules),
// and the From domain aligned with the SPF domain or the DKIM d= under
// its alignment modes (relaxed unless the record says aspf=s or adkim=s).
func (c *checker) bulkDMARC(dkimDomain string) {
	recs, source, err := c.dmarcRecords()
	var rec *dmarcRecord
	switch {
	case err != nil:
		c.rule(RuleDMARC, Error, fmt.Sprintf("The DMARC record of %s could not be read: %v.", c.domain, err),
			"Check that the resolver answers and run the check again.")
	case len(recs) == 0:
		c.rule(RuleDMARC, Error, fmt.Sprintf("No DMARC record is published for %s: Gmail, Yahoo and Microsoft refuse or junk bulk mail without one.", c.domain),
			fmt.Sprintf("Publish a TXT record at _dmarc.%s: \"v=DMARC1; p=none; rua=mailto:dmarc-reports@%s\" at least.", c.domain, c.domain))
	case len(recs) > 1:
		c.rule(RuleDMARC, Error, fmt.Sprintf("_dmarc.%s has %d DMARC records, so receivers apply none.", source, len(recs)),
			"Keep a single v=DMARC1 record.")
	default:
		if rec, _ = parseDMARC(recs[0]); rec == nil || rec.tags["p"] == "" {
			c.rule(RuleDMARC, Error, fmt.Sprintf("The DMARC record of %s is not valid (see DMARC above), so receivers treat the domain as having none.", source),
				"Correct the record as the DMARC findings above say.")
			rec = nil
		} else {
			c.rule(RuleDMARC, OK, fmt.Sprintf("A DMARC record is published for %s (at _dmarc.%s, p=%s).", c.domain, source, strings.ToLower(rec.tags["p"])), "")
		}
	}
	c.bulkAlignment(rec, dkimDomain)
}

// dmarcRecords returns the DMARC records that apply to the domain: its
// own, else its organizational domain's, and where they were found.
func (c *checker) dmarcRecords() ([]string, string, error) {
	recs, err := c.fetchDMARC(c.domain)
	if err != nil || len(recs) > 0 {
		return recs, c.domain, err
	}
	org := orgDomain(c.domain)
	if org == c.domain {
		return nil, c.domain, nil
	}
	recs, err = c.fetchDMARC(org)
	return recs, org, err
}

func (c *checker) bulkAlignment(rec *dmarcRecord, dkimDomain string) {
	aligned := func(tag, d string) (bool, string) {
		if rec != nil && strings.EqualFold(rec.tags[tag], "s") {
			return d == c.domain, "strict"
		}
		return orgDomain(d) == orgDomain(c.domain), "relaxed"
	}
	spfOK, spfMode := aligned("aspf", c.envDomain)
	dkimOK, dkimMode := aligned("adkim", dkimDomain)
	spf := fmt.Sprintf("the SPF domain %s (%s)", c.envDomain, spfMode)
	dk := fmt.Sprintf("the DKIM domain d=%s (%s)", dkimDomain, dkimMode)
	switch {
	case spfOK && dkimOK:
		c.rule(RuleAlignment, OK, fmt.Sprintf("The From domain %s aligns with %s and with %s, so DMARC can pass on either.", c.domain, spf, dk), "")
	case dkimOK:
		c.rule(RuleAlignment, Warning, fmt.Sprintf("The From domain %s aligns with %s but not with %s: DMARC passes on the DKIM signature alone.", c.domain, dk, spf),
			fmt.Sprintf("Use a --bounce-domain under %s (bounces.%s, say) so that SPF aligns too.", orgDomain(c.domain), orgDomain(c.domain)))
	case spfOK:
		c.rule(RuleAlignment, Warning, fmt.Sprintf("The From domain %s aligns with %s but not with %s: DMARC passes on SPF alone, which forwarding breaks.", c.domain, spf, dk),
			fmt.Sprintf("Sign with a key of %s (`sendonce domains add %s`).", c.domain, c.domain))
	default:
		c.rule(RuleAlignment, Error, fmt.Sprintf("The From domain %s aligns with neither %s nor %s, so DMARC fails for every message.", c.domain, spf, dk),
			fmt.Sprintf("Sign with a key of %s (`sendonce domains add %s`), and use a --bounce-domain under %s.", c.domain, c.domain, orgDomain(c.domain)))
	}
}

// bulkPTR restates, per egress source, what the egress check found about
// its reverse DNS; the fixes are that check's.
func (c *checker) bulkPTR() {
	if len(c.egress) == 0 {
		c.rule(RulePTR, OK, "No egress sources are configured, so no reverse DNS was checked here: through a relay or provider, its operator keeps it; with the mx transport, give each address mail leaves from as --egress-source to have it checked.", "")
		return
	}
	for _, o := range c.egress {
		var failed *Finding
		for i := range o.findings {
			if o.findings[i].Level == Error {
				failed = &o.findings[i]
				break
			}
		}
		if failed == nil {
			c.rule(RulePTR, OK, fmt.Sprintf("Egress source %s (%s) has forward-confirmed reverse DNS.", o.src.Name, o.src.IP), "")
			continue
		}
		fix := failed.Fix
		if fix == "" {
			fix = "Publish a PTR record for the address naming a host whose A or AAAA record gives the address back."
		}
		c.rule(RulePTR, Error, fmt.Sprintf("Egress source %s (%s) lacks forward-confirmed reverse DNS (see EGRESS above): receivers refuse bulk mail from it.", o.src.Name, o.src.IP), fix)
	}
}

// bulkOneClick: bulk mail always carries List-Unsubscribe with the
// --public-url link and List-Unsubscribe-Post (RFC 8058); receivers only
// use an https link they can reach.
func (c *checker) bulkOneClick(publicURL string) {
	const what = "Bulk mail carries List-Unsubscribe: <%s/u/TOKEN> and List-Unsubscribe-Post: List-Unsubscribe=One-Click, DKIM-signed (RFC 8058)"
	fix := "Serve the API over https at a public name and set --public-url to it (https://mail.example.com, say)."
	if strings.TrimSpace(publicURL) == "" {
		c.rule(RuleOneClick, Warning, "--public-url is not set, so the one-click unsubscribe links of bulk mail are http://--addr, which receivers cannot use.", fix)
		return
	}
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		c.rule(RuleOneClick, Warning, fmt.Sprintf("--public-url %q is not a URL, so bulk mail's one-click unsubscribe links do not work.", publicURL), fix)
		return
	}
	base := strings.TrimSuffix(u.String(), "/")
	switch host := strings.ToLower(u.Hostname()); {
	case u.Scheme != "https":
		c.rule(RuleOneClick, Warning, fmt.Sprintf(what+", but the link is %s, not https: Gmail and Yahoo want an https link.", base, u.Scheme), fix)
	case localHost(host):
		c.rule(RuleOneClick, Warning, fmt.Sprintf(what+", but %s is a local name or address that receivers cannot reach.", base, host), fix)
	default:
		c.rule(RuleOneClick, OK, fmt.Sprintf(what+"; an unsubscribe takes effect at once.", base), "")
	}
}

// localHost reports whether host is a name or address receivers cannot
// reach: localhost, loopback, private, link-local or unspecified.
func localHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified()
}

// count is how many findings of check have level l so far.
func (c *checker) count(check string, l Level) int {
	n := 0
	for _, f := range c.rep.Findings {
		if f.Check == check && f.Level == l {
			n++
		}
	}
	return n
}
