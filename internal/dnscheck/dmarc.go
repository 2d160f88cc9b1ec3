package dnscheck

import (
	"fmt"
	"net/mail"
	"regexp"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// dmarcRecord is a DMARC record (RFC 7489 section 6.3) with the tags as
// published.
type dmarcRecord struct {
	tags map[string]string // by lower-case name
}

// dmarcSize matches the optional size limit of a report URI ("!10m").
var dmarcSize = regexp.MustCompile(`^[0-9]+[kmgt]?$`)

// fetchDMARC returns the DMARC records (text) published at _dmarc.<d>.
func (c *checker) fetchDMARC(d string) ([]string, error) {
	a, err := c.lookup("_dmarc."+d, dns.TypeTXT)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range a.TXT() {
		if strings.HasPrefix(strings.TrimSpace(t), "v=DMARC1") {
			out = append(out, t)
		}
	}
	return out, nil
}

func (c *checker) checkDMARC() {
	source := c.domain
	recs, err := c.fetchDMARC(source)
	if err != nil {
		c.lookupFailed(CheckDMARC, err)
		return
	}
	inherited := false
	if org := orgDomain(c.domain); len(recs) == 0 && org != c.domain {
		if recs, err = c.fetchDMARC(org); err != nil {
			c.lookupFailed(CheckDMARC, err)
			return
		}
		source, inherited = org, len(recs) > 0
	}
	switch {
	case len(recs) == 0:
		c.fail(CheckDMARC, fmt.Sprintf("There is no DMARC record at _dmarc.%s; large mailbox providers require one from bulk senders and may junk or refuse the mail.", c.domain),
			fmt.Sprintf("Publish a TXT record at _dmarc.%s such as \"v=DMARC1; p=none; rua=mailto:dmarc-reports@%s\" (sendonce domains add prints one), then tighten p= as the reports allow.", c.domain, c.domain))
		return
	case len(recs) > 1:
		c.fail(CheckDMARC, fmt.Sprintf("_dmarc.%s has %d DMARC records; receivers then apply no DMARC policy at all (RFC 7489 section 6.6.3).", source, len(recs)),
			"Keep a single v=DMARC1 record.")
		return
	}
	if inherited {
		c.ok(CheckDMARC, "%s has no DMARC record of its own; the record of its organizational domain applies: %q.", c.domain, recs[0])
	} else {
		c.ok(CheckDMARC, "_dmarc.%s has one DMARC record: %q.", c.domain, recs[0])
	}
	rec, errs := parseDMARC(recs[0])
	for _, e := range errs {
		c.fail(CheckDMARC, fmt.Sprintf("The DMARC record of %s is invalid: %s.", source, e),
			"Correct the record (RFC 7489 section 6.3 defines the tags); receivers ignore an invalid record.")
	}
	if rec == nil {
		return
	}
	c.dmarcPolicy(rec, source, inherited)
	c.dmarcReports(rec, source)
	c.dmarcAlignment(rec)
}

// parseDMARC parses the tag list; it returns nil with the errors when the
// record cannot be used at all.
func parseDMARC(s string) (*dmarcRecord, []string) {
	r := &dmarcRecord{tags: make(map[string]string)}
	var errs []string
	first := true
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		name, value = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)
		if !ok || name == "" {
			errs = append(errs, fmt.Sprintf("%q is not a tag=value pair", part))
			continue
		}
		if first && (name != "v" || value != "DMARC1") {
			return nil, []string{"the record must start with v=DMARC1"}
		}
		first = false
		if _, dup := r.tags[name]; dup {
			errs = append(errs, fmt.Sprintf("the %s= tag appears twice", name))
			continue
		}
		r.tags[name] = value
	}
	check := func(tag string, valid func(string) bool, want string) {
		if v, ok := r.tags[tag]; ok && !valid(v) {
			errs = append(errs, fmt.Sprintf("%s=%s is not valid (want %s)", tag, v, want))
		}
	}
	policy := func(v string) bool { return v == "none" || v == "quarantine" || v == "reject" }
	check("p", func(v string) bool { return policy(strings.ToLower(v)) }, "none, quarantine or reject")
	check("sp", func(v string) bool { return policy(strings.ToLower(v)) }, "none, quarantine or reject")
	check("pct", func(v string) bool { n, err := strconv.Atoi(v); return err == nil && n >= 0 && n <= 100 }, "an integer from 0 to 100")
	rs := func(v string) bool { v = strings.ToLower(v); return v == "r" || v == "s" }
	check("adkim", rs, "r or s")
	check("aspf", rs, "r or s")
	check("ri", func(v string) bool { _, err := strconv.ParseUint(v, 10, 32); return err == nil }, "a number of seconds")
	check("fo", func(v string) bool {
		for _, o := range strings.Split(v, ":") {
			if o = strings.TrimSpace(o); o != "0" && o != "1" && o != "d" && o != "s" {
				return false
			}
		}
		return true
	}, "0, 1, d or s, separated by colons")
	if _, ok := r.tags["p"]; !ok {
		errs = append(errs, "there is no p= tag (the policy)")
	}
	return r, errs
}

func (c *checker) dmarcPolicy(r *dmarcRecord, source string, inherited bool) {
	p := strings.ToLower(r.tags["p"])
	sp, hasSP := strings.ToLower(r.tags["sp"]), r.tags["sp"] != ""
	effective, tag := p, "p"
	if inherited && hasSP {
		effective, tag = sp, "sp"
	}
	switch effective {
	case "none":
		c.warn(CheckDMARC, fmt.Sprintf("The DMARC policy for %s is %s=none: receivers only report mail that fails DMARC, they do not act on it, so spoofed mail is not stopped.", c.domain, tag),
			"Once the aggregate reports show that all your mail passes, raise the policy to p=quarantine, then p=reject.")
	case "quarantine", "reject":
		c.ok(CheckDMARC, "The DMARC policy for %s is %s=%s.", c.domain, tag, effective)
	}
	if hasSP && sp == "none" && (p == "quarantine" || p == "reject") && !inherited {
		c.warn(CheckDMARC, fmt.Sprintf("The DMARC record of %s sets sp=none: its subdomains are not protected although p=%s.", source, p),
			"Remove sp= (subdomains then inherit p=) or set it to quarantine or reject.")
	}
	if v, ok := r.tags["pct"]; ok {
		if n, err := strconv.Atoi(v); err == nil && n < 100 {
			c.warn(CheckDMARC, fmt.Sprintf("The DMARC record of %s has pct=%d: the policy applies to only %d%% of the mail that fails DMARC.", source, n, n),
				"Raise pct to 100 (or remove the tag) once you trust the policy.")
		}
	}
}

func (c *checker) dmarcReports(r *dmarcRecord, source string) {
	rua, ok := r.tags["rua"]
	if !ok || rua == "" {
		c.warn(CheckDMARC, fmt.Sprintf("The DMARC record of %s has no rua= tag, so no receiver sends aggregate reports: you cannot see who sends as %s or whether your mail passes.", source, c.domain),
			fmt.Sprintf("Add rua=mailto:dmarc-reports@%s (a mailbox you read, or a DMARC report service).", source))
	} else if addrs := c.dmarcURIs("rua", rua, source); len(addrs) > 0 {
		c.ok(CheckDMARC, "Aggregate reports (rua) go to %s.", strings.Join(addrs, ", "))
	}
	if ruf, ok := r.tags["ruf"]; ok && ruf != "" {
		if addrs := c.dmarcURIs("ruf", ruf, source); len(addrs) > 0 {
			c.ok(CheckDMARC, "Failure reports (ruf) go to %s; few receivers send them.", strings.Join(addrs, ", "))
		}
	}
}

// dmarcURIs validates a rua or ruf list and checks that external
// destinations accept reports for source (RFC 7489 section 7.1). It
// returns the valid addresses.
func (c *checker) dmarcURIs(tag, list, source string) []string {
	var good []string
	for _, uri := range strings.Split(list, ",") {
		uri = strings.TrimSpace(uri)
		scheme, rest, ok := strings.Cut(uri, ":")
		if !ok || !strings.EqualFold(scheme, "mailto") {
			c.fail(CheckDMARC, fmt.Sprintf("The %s= tag of %s has %q, which is not a mailto: URI; receivers only send reports by mail.", tag, source, uri),
				fmt.Sprintf("Use %s=mailto:address, separating several with commas.", tag))
			continue
		}
		addr, size, hasSize := strings.Cut(rest, "!")
		a, err := mail.ParseAddress(addr)
		if err != nil || a.Address != addr || strings.Count(addr, "@") != 1 || (hasSize && !dmarcSize.MatchString(strings.ToLower(size))) {
			c.fail(CheckDMARC, fmt.Sprintf("The %s= tag of %s has %q, which is not a valid mailto: URI.", tag, source, uri),
				fmt.Sprintf("Use %s=mailto:address (optionally with a size limit such as !10m), separating several with commas.", tag))
			continue
		}
		good = append(good, addr)
		dest := strings.ToLower(addr[strings.LastIndexByte(addr, '@')+1:])
		if orgDomain(dest) == orgDomain(source) {
			continue
		}
		auth := source + "._report._dmarc." + dest
		a2, err := c.lookup(auth, dns.TypeTXT)
		if err != nil {
			c.lookupFailed(CheckDMARC, err)
			continue
		}
		authorized := false
		for _, t := range a2.TXT() {
			if strings.HasPrefix(strings.TrimSpace(t), "v=DMARC1") {
				authorized = true
			}
		}
		if !authorized {
			c.warn(CheckDMARC, fmt.Sprintf("Reports for %s go to %s, another domain, which has not published %s authorizing them; receivers will not send those reports (RFC 7489 section 7.1).", source, addr, auth),
				fmt.Sprintf("Ask the operator of %s to publish TXT \"v=DMARC1\" at %s, or use an address at %s.", dest, auth, source))
		}
	}
	return good
}

func (c *checker) dmarcAlignment(r *dmarcRecord) {
	mode := func(tag string) string {
		if strings.ToLower(r.tags[tag]) == "s" {
			return "strict"
		}
		return "relaxed"
	}
	// sendonce signs with d= the From domain: DKIM always aligns.
	c.ok(CheckDMARC, "sendonce signs with d=%s, the From domain, so DKIM aligns (%s alignment).", c.domain, mode("adkim"))
	env := c.envDomain
	aligned := env == c.domain
	if mode("aspf") == "relaxed" {
		aligned = orgDomain(env) == orgDomain(c.domain)
	}
	if aligned {
		c.ok(CheckDMARC, "The envelope sender domain %s aligns with the From domain %s for SPF (%s alignment).", env, c.domain, mode("aspf"))
		return
	}
	c.warn(CheckDMARC, fmt.Sprintf("The envelope sender domain %s does not align with the From domain %s (%s SPF alignment), so SPF cannot make DMARC pass: DMARC rests on the DKIM signature alone.", env, c.domain, mode("aspf")),
		fmt.Sprintf("Use an envelope sender (Return-Path) at %s or, with relaxed alignment, at a subdomain of it.", c.domain))
}
