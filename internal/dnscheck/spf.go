package dnscheck

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

const (
	// spfLookupLimit is RFC 7208 section 4.6.4's limit on terms that cause
	// DNS lookups.
	spfLookupLimit = 10
	// spfLookupWarn is the count from which the record is "close to" the
	// limit.
	spfLookupWarn = 8
	// spfMaxDepth bounds include and redirect nesting.
	spfMaxDepth = 10
	// spfMaxCounted stops the count (and the fetching) well past the limit.
	spfMaxCounted = 30
	// spfMaxMXNames is RFC 7208 section 4.6.4's limit on the names an mx
	// mechanism looks up.
	spfMaxMXNames = 10
)

// spfMech is one directive: a qualifier and a mechanism.
type spfMech struct {
	qual   byte   // '+', '-', '~' or '?'
	name   string // all, include, a, mx, ptr, ip4, ip6, exists (lower case)
	domain string // the domain-spec of include, exists, a, mx, ptr; "" for the current domain
	macro  bool   // domain contains macros, which need the message to expand
	net    netip.Prefix
	cidr4  int // a and mx: the IPv4 prefix length, 32 when absent
	cidr6  int // a and mx: the IPv6 prefix length, 128 when absent
	text   string
}

// spfRecord is a parsed SPF record.
type spfRecord struct {
	mechs    []spfMech
	redirect string
	macros   bool
	afterAll []string // terms after an all mechanism, never evaluated
}

func (r *spfRecord) all() *spfMech {
	for i := range r.mechs {
		if r.mechs[i].name == "all" {
			return &r.mechs[i]
		}
	}
	return nil
}

// isSPF reports whether a TXT record is an SPF record: "v=spf1" alone or
// followed by a space (RFC 7208 section 4.5).
func isSPF(s string) bool {
	return len(s) >= 6 && strings.EqualFold(s[:6], "v=spf1") && (len(s) == 6 || s[6] == ' ')
}

// parseSPF parses an SPF record (RFC 7208 section 12) and returns the
// syntax errors found, each a phrase.
func parseSPF(s string) (*spfRecord, []string) {
	r := &spfRecord{}
	var errs []string
	terms := strings.Fields(s)[1:]
	seenAll := false
	hasExp := false
	for _, term := range terms {
		if seenAll {
			r.afterAll = append(r.afterAll, term)
		}
		if name, value, ok := strings.Cut(term, "="); ok && validModifierName(name) {
			switch strings.ToLower(name) {
			case "redirect":
				if r.redirect != "" {
					errs = append(errs, "redirect= appears more than once")
					continue
				}
				if value == "" {
					errs = append(errs, "redirect= has no domain")
					continue
				}
				if msg := checkDomainSpec(value); msg != "" {
					errs = append(errs, fmt.Sprintf("redirect=%s: %s", value, msg))
					continue
				}
				r.redirect = strings.ToLower(trimDot(value))
				r.macros = r.macros || strings.Contains(value, "%")
			case "exp":
				if hasExp {
					errs = append(errs, "exp= appears more than once")
				}
				hasExp = true
			}
			continue // unknown modifiers are ignored (section 6)
		}
		m, msg := parseMech(term)
		if msg != "" {
			errs = append(errs, fmt.Sprintf("%q: %s", term, msg))
			continue
		}
		r.macros = r.macros || m.macro
		if !seenAll {
			r.mechs = append(r.mechs, m)
		}
		if m.name == "all" {
			seenAll = true
		}
	}
	return r, errs
}

func validModifierName(s string) bool {
	if s == "" || !isAlpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlpha(c) && !(c >= '0' && c <= '9') && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func parseMech(term string) (spfMech, string) {
	m := spfMech{qual: '+', text: term, cidr4: 32, cidr6: 128}
	if strings.ContainsRune("+-~?", rune(term[0])) {
		m.qual = term[0]
		term = term[1:]
	}
	name, arg := term, ""
	hasArg := false
	if i := strings.IndexAny(term, ":/"); i >= 0 {
		name, arg = term[:i], term[i:]
		hasArg = true
	}
	m.name = strings.ToLower(name)
	switch m.name {
	case "all":
		if hasArg {
			return m, "all takes no argument"
		}
	case "include", "exists":
		if !strings.HasPrefix(arg, ":") || len(arg) < 2 {
			return m, m.name + " needs a domain (" + m.name + ":example.com)"
		}
		m.domain = arg[1:]
	case "ptr":
		if hasArg {
			if !strings.HasPrefix(arg, ":") || len(arg) < 2 {
				return m, "ptr takes an optional :domain"
			}
			m.domain = arg[1:]
		}
	case "a", "mx":
		if strings.HasPrefix(arg, ":") {
			d, cidr, hasCIDR := strings.Cut(arg[1:], "/")
			if d == "" {
				return m, m.name + ": empty domain"
			}
			m.domain, arg = d, ""
			if hasCIDR {
				arg = "/" + cidr
			}
		}
		if arg != "" {
			if msg := parseDualCIDR(arg, &m); msg != "" {
				return m, msg
			}
		}
	case "ip4", "ip6":
		if !strings.HasPrefix(arg, ":") {
			return m, m.name + " needs an address (" + m.name + ":…)"
		}
		addr := arg[1:]
		if !strings.Contains(addr, "/") {
			if m.name == "ip4" {
				addr += "/32"
			} else {
				addr += "/128"
			}
		}
		p, err := netip.ParsePrefix(addr)
		if err != nil || (m.name == "ip4") != p.Addr().Is4() {
			return m, "not a valid " + map[string]string{"ip4": "IPv4", "ip6": "IPv6"}[m.name] + " address or prefix"
		}
		m.net = p.Masked()
	default:
		return m, "unknown mechanism " + strconv.Quote(name)
	}
	if m.domain != "" {
		if msg := checkDomainSpec(m.domain); msg != "" {
			return m, msg
		}
		m.macro = strings.Contains(m.domain, "%")
		m.domain = strings.ToLower(trimDot(m.domain))
	}
	return m, ""
}

// parseDualCIDR parses "/n", "//n" or "/n//m" for a and mx.
func parseDualCIDR(s string, m *spfMech) string {
	v4, v6, both := strings.Cut(strings.TrimPrefix(s, "/"), "//")
	if strings.HasPrefix(s, "//") {
		v4, v6, both = "", strings.TrimPrefix(s, "//"), true
	}
	if v4 == "" && !both {
		return "empty prefix length"
	}
	if v4 != "" {
		n, err := strconv.Atoi(v4)
		if err != nil || n < 0 || n > 32 {
			return "invalid IPv4 prefix length /" + v4
		}
		m.cidr4 = n
	}
	if both {
		n, err := strconv.Atoi(v6)
		if err != nil || n < 0 || n > 128 {
			return "invalid IPv6 prefix length //" + v6
		}
		m.cidr6 = n
	}
	return ""
}

// checkDomainSpec validates a domain-spec: a domain name, or a macro
// string whose macros are well formed.
func checkDomainSpec(s string) string {
	if strings.Contains(s, "%") {
		for i := 0; i < len(s); i++ {
			if s[i] != '%' {
				continue
			}
			if i+1 >= len(s) {
				return "macro string ends with %"
			}
			switch s[i+1] {
			case '%', '_', '-':
				i++
			case '{':
				end := strings.IndexByte(s[i:], '}')
				if end < 0 || end < 3 || !strings.ContainsRune("slodiphcrtvSLODIPHCRTV", rune(s[i+2])) {
					return "malformed macro"
				}
				i += end
			default:
				return "malformed macro (a literal % is written %%)"
			}
		}
		return ""
	}
	d := trimDot(s)
	if !strings.Contains(d, ".") || !validName(d) {
		return "not a valid domain name"
	}
	return ""
}

// spfFetch is the SPF record of one domain as fetched.
type spfFetch struct {
	err     error // lookup failure
	records []string
	rec     *spfRecord
	syntax  []string
}

func (c *checker) fetchSPF(domain string) *spfFetch {
	if f, ok := c.spf[domain]; ok {
		return f
	}
	f := &spfFetch{}
	c.spf[domain] = f
	a, err := c.lookup(domain, dns.TypeTXT)
	if err != nil {
		f.err = err
		return f
	}
	for _, t := range a.TXT() {
		if isSPF(t) {
			f.records = append(f.records, t)
		}
	}
	if len(f.records) == 1 {
		f.rec, f.syntax = parseSPF(f.records[0])
	}
	return f
}

func (c *checker) checkSPF() {
	f := c.fetchSPF(c.domain)
	switch {
	case f.err != nil:
		c.lookupFailed(CheckSPF, f.err)
		return
	case len(f.records) == 0:
		c.fail(CheckSPF, fmt.Sprintf("%s has no SPF record, so receivers cannot tell which servers may send its mail.", c.domain),
			fmt.Sprintf("Publish one TXT record at %s listing your sending servers, such as \"v=spf1 ip4:<sending IP> ~all\" (sendonce domains add prints a suggestion).", c.domain))
		return
	case len(f.records) > 1:
		c.fail(CheckSPF, fmt.Sprintf("%s has %d SPF records; receivers treat that as a permanent error (RFC 7208 section 4.5), so SPF fails for all its mail.", c.domain, len(f.records)),
			"Merge them into a single v=spf1 record and delete the others.")
		return
	}
	c.ok(CheckSPF, "%s has one SPF record: %q.", c.domain, f.records[0])
	if len(f.syntax) > 0 {
		for _, e := range f.syntax {
			c.fail(CheckSPF, fmt.Sprintf("The SPF record of %s has a syntax error: %s; receivers treat the whole record as a permanent error.", c.domain, e),
				"Correct the term (RFC 7208 section 5 lists the mechanisms and their syntax) or remove it.")
		}
		return
	}

	w := &spfWalk{c: c}
	w.visit(f.rec, []string{c.domain})
	c.rep.Findings = append(c.rep.Findings, w.problems...)
	switch n := w.lookups; {
	case n > spfLookupLimit:
		more := ""
		if w.truncated {
			more = "at least "
		}
		c.fail(CheckSPF, fmt.Sprintf("The SPF record of %s needs %s%d DNS lookups (include, a, mx, ptr, exists and redirect, counted through includes); receivers stop at %d and treat the record as a permanent error (RFC 7208 section 4.6.4).", c.domain, more, n, spfLookupLimit),
			"Remove includes you no longer use, replace a and mx mechanisms with ip4/ip6 ranges, or flatten nested includes into the address ranges they list.")
	case n >= spfLookupWarn:
		c.warn(CheckSPF, fmt.Sprintf("The SPF record of %s uses %d of the %d DNS lookups receivers allow; one more include from a provider would break it.", c.domain, n, spfLookupLimit),
			"Replace a and mx mechanisms with ip4/ip6 ranges, or drop includes you no longer use, to keep room.")
	default:
		c.ok(CheckSPF, "The SPF record of %s uses %d of the %d DNS lookups receivers allow.", c.domain, n, spfLookupLimit)
	}
	c.spfAll(f.rec)
	for _, m := range f.rec.mechs {
		if m.name == "ptr" {
			c.warn(CheckSPF, fmt.Sprintf("The SPF record of %s uses %q, which RFC 7208 section 5.5 says not to use: it is slow and some receivers ignore it.", c.domain, m.text),
				"Replace ptr with the ip4/ip6 ranges or a: hosts of your sending servers.")
		}
	}
	if len(f.rec.afterAll) > 0 {
		c.warn(CheckSPF, fmt.Sprintf("The SPF record of %s has terms after its all mechanism (%s); they are never evaluated.", c.domain, strings.Join(f.rec.afterAll, " ")),
			"Move those terms before the all mechanism, or remove them.")
	}
	if f.rec.macros {
		c.ok(CheckSPF, "The SPF record of %s uses macros, which need a message to expand: the lookups they cause were counted but not followed.", c.domain)
	}
	c.spfCoverage()
}

// spfAll reports on the all mechanism in effect: the record's own, or that
// of its redirect target.
func (c *checker) spfAll(rec *spfRecord) {
	all, via := rec.all(), ""
	for depth := 0; all == nil && rec.redirect != "" && !strings.Contains(rec.redirect, "%") && depth < spfMaxDepth; depth++ {
		f := c.fetchSPF(rec.redirect)
		if f.rec == nil || len(f.syntax) > 0 {
			return // reported by the walk
		}
		via = " (through redirect=" + rec.redirect + ")"
		rec = f.rec
		all = rec.all()
	}
	if all == nil {
		if rec.redirect != "" {
			return // a macro redirect: cannot tell
		}
		c.warn(CheckSPF, fmt.Sprintf("The SPF record of %s has no all mechanism%s, so servers it does not list get a neutral result.", c.domain, via),
			"End the record with ~all (or -all).")
		return
	}
	switch all.qual {
	case '-':
		c.ok(CheckSPF, "The SPF record of %s ends with -all%s: servers it does not list fail SPF.", c.domain, via)
	case '~':
		c.ok(CheckSPF, "The SPF record of %s ends with ~all%s: servers it does not list soft-fail, and DMARC decides.", c.domain, via)
	case '?':
		c.warn(CheckSPF, fmt.Sprintf("The SPF record of %s ends with ?all%s (neutral): it says nothing about servers it does not list, so it protects nothing.", c.domain, via),
			"End the record with ~all or -all.")
	default:
		c.fail(CheckSPF, fmt.Sprintf("The SPF record of %s ends with %s%s: every server on the Internet passes SPF for %s.", c.domain, all.text, via, c.domain),
			"Replace it with ~all or -all.")
	}
}

// spfWalk counts the DNS lookups of a record through its includes and
// redirect, and collects the problems of the records it reaches.
type spfWalk struct {
	c         *checker
	lookups   int
	truncated bool // stopped counting past spfMaxCounted or spfMaxDepth
	problems  []Finding
}

func (w *spfWalk) visit(rec *spfRecord, stack []string) {
	for _, m := range rec.mechs {
		switch m.name {
		case "include":
			w.lookups++
			if !m.macro {
				w.follow("include:"+m.domain, m.domain, stack)
			}
		case "a", "mx", "ptr", "exists":
			w.lookups++
		}
	}
	if rec.redirect != "" && rec.all() == nil {
		w.lookups++
		if !strings.Contains(rec.redirect, "%") {
			w.follow("redirect="+rec.redirect, rec.redirect, stack)
		}
	}
}

func (w *spfWalk) follow(term, target string, stack []string) {
	c := w.c
	if w.lookups > spfMaxCounted || len(stack) > spfMaxDepth {
		w.truncated = true
		return
	}
	path := strings.Join(append(slices.Clone(stack), target), " → ")
	if slices.Contains(stack, target) {
		w.problem(Error, fmt.Sprintf("The SPF record of %s loops: %s.", c.domain, path),
			fmt.Sprintf("Remove %s from the record of %s.", term, stack[len(stack)-1]))
		w.truncated = true
		return
	}
	f := c.fetchSPF(target)
	switch {
	case f.err != nil:
		w.problem(Error, fmt.Sprintf("The SPF record of %s reaches %s (%s), whose lookup failed: %v.", c.domain, target, path, f.err),
			"Run the check again; if it persists, check the name servers of "+target+".")
		return
	case len(f.records) == 0:
		w.problem(Error, fmt.Sprintf("The SPF record of %s has %s, but %s has no SPF record: receivers treat that as a permanent error (RFC 7208 section 5.2).", c.domain, term, target),
			fmt.Sprintf("Correct the domain in %s (your provider documents the right one) or remove it.", term))
		return
	case len(f.records) > 1:
		w.problem(Error, fmt.Sprintf("The SPF record of %s has %s, but %s has %d SPF records: receivers treat that as a permanent error.", c.domain, term, target, len(f.records)),
			fmt.Sprintf("Ask the operator of %s to keep a single SPF record, or remove %s.", target, term))
		return
	case len(f.syntax) > 0:
		w.problem(Error, fmt.Sprintf("The SPF record of %s has %s, whose record has a syntax error: %s.", c.domain, term, f.syntax[0]),
			fmt.Sprintf("Ask the operator of %s to fix it, or remove %s.", target, term))
		return
	}
	w.visit(f.rec, append(stack, target))
}

func (w *spfWalk) problem(l Level, msg, fix string) {
	w.problems = append(w.problems, Finding{Check: CheckSPF, Level: l, Message: msg, Fix: fix})
}

// spfCoverage checks that SPF passes for the relay's addresses.
func (c *checker) spfCoverage() {
	ips := slices.Clone(c.opts.RelayIPs)
	label := map[netip.Addr]string{}
	if h := c.opts.RelayHost; h != "" {
		host := strings.ToLower(trimDot(h))
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = append(ips, ip)
		} else {
			addrs, _, err := c.addresses(host)
			if err != nil {
				c.lookupFailed(CheckSPF, err)
				return
			}
			if len(addrs) == 0 {
				c.warn(CheckSPF, fmt.Sprintf("The relay host %s has no address record, so whether SPF covers it could not be checked.", host),
					"Check the relay's host name, or give its addresses instead.")
			}
			for _, ip := range addrs {
				label[ip] = host + " "
			}
			ips = append(ips, addrs...)
		}
	}
	for _, ip := range ips {
		ip = ip.Unmap()
		e := &spfEval{c: c}
		res, why := e.eval(c.domain, ip, 0)
		who := fmt.Sprintf("the relay %s(%s)", label[ip], ip)
		switch res {
		case spfPass:
			c.ok(CheckSPF, "SPF passes for %s: %s.", who, why)
		case spfUnknown, spfTempError:
			c.warn(CheckSPF, fmt.Sprintf("Whether SPF passes for %s could not be determined: %s.", who, why),
				"Make sure the record lists the relay's addresses with ip4/ip6 or its provider's include: mechanism.")
		case spfPermError:
			c.fail(CheckSPF, fmt.Sprintf("SPF gives permerror for %s because %s, so mail relayed there fails SPF.", who, why),
				"Correct the SPF errors reported above; then SPF can pass for the relay.")
		default:
			mech := "ip4:" + ip.String()
			if ip.Is6() {
				mech = "ip6:" + ip.String()
			}
			c.fail(CheckSPF, fmt.Sprintf("SPF gives %s for %s because %s, so mail relayed there fails SPF.", res, who, why),
				fmt.Sprintf("Add %s (or the include: mechanism your relay provider documents) to the SPF record of %s, before the all mechanism.", mech, c.domain))
		}
	}
}

// SPF results (RFC 7208 section 2.6), plus unknown for what this check
// cannot evaluate without a message (macros, ptr, exists).
const (
	spfPass      = "pass"
	spfFail      = "fail"
	spfSoftFail  = "softfail"
	spfNeutral   = "neutral"
	spfNone      = "none"
	spfPermError = "permerror"
	spfTempError = "temperror"
	spfUnknown   = "unknown"
)

// spfEval evaluates check_host() for one address.
type spfEval struct {
	c       *checker
	lookups int
}

func (e *spfEval) eval(domain string, ip netip.Addr, depth int) (string, string) {
	if depth > spfMaxDepth {
		return spfPermError, "includes nest more than 10 deep"
	}
	f := e.c.fetchSPF(domain)
	switch {
	case f.err != nil:
		return spfTempError, f.err.Error()
	case len(f.records) == 0:
		return spfNone, domain + " has no SPF record"
	case len(f.records) > 1 || len(f.syntax) > 0:
		return spfPermError, "the record of " + domain + " is invalid"
	}
	for _, m := range f.rec.mechs {
		switch m.name {
		case "include", "a", "mx", "ptr", "exists":
			if e.lookups++; e.lookups > spfLookupLimit {
				return spfPermError, "the record needs more than 10 DNS lookups"
			}
		}
		matched, res, why := e.match(m, domain, ip, depth)
		if res != "" {
			return res, why
		}
		if matched {
			return qualResult(m.qual), fmt.Sprintf("%q matches in the record of %s", m.text, domain)
		}
	}
	if f.rec.redirect != "" {
		if strings.Contains(f.rec.redirect, "%") {
			return spfUnknown, "redirect= uses macros"
		}
		if e.lookups++; e.lookups > spfLookupLimit {
			return spfPermError, "the record needs more than 10 DNS lookups"
		}
		res, why := e.eval(f.rec.redirect, ip, depth+1)
		if res == spfNone {
			return spfPermError, "redirect=" + f.rec.redirect + " has no SPF record"
		}
		return res, why
	}
	return spfNeutral, "no mechanism of the record of " + domain + " matches (the default is neutral)"
}

// match returns whether m matches ip, or a final result (a non-empty res)
// when evaluation cannot go on.
func (e *spfEval) match(m spfMech, domain string, ip netip.Addr, depth int) (matched bool, res, why string) {
	target := domain
	if m.domain != "" {
		target = m.domain
	}
	switch m.name {
	case "all":
		return true, "", ""
	case "ip4", "ip6":
		return m.net.Contains(ip), "", ""
	case "ptr", "exists":
		return false, spfUnknown, fmt.Sprintf("%q cannot be evaluated without a message", m.text)
	}
	if m.macro {
		return false, spfUnknown, fmt.Sprintf("%q uses macros", m.text)
	}
	switch m.name {
	case "include":
		r, w := e.eval(target, ip, depth+1)
		switch r {
		case spfPass:
			return true, "", ""
		case spfFail, spfSoftFail, spfNeutral:
			return false, "", ""
		case spfNone:
			return false, spfPermError, m.text + " names a domain without SPF record"
		}
		return false, r, w
	case "a":
		return e.matchHost(target, ip, m)
	case "mx":
		a, err := e.c.lookup(target, dns.TypeMX)
		if err != nil {
			return false, spfTempError, err.Error()
		}
		for i, rr := range a.Records {
			if i >= spfMaxMXNames {
				return false, spfPermError, m.text + " names more than 10 hosts"
			}
			if ok, res, why := e.matchHost(rr.(*dns.MX).Mx, ip, m); ok || res != "" {
				return ok, res, why
			}
		}
	}
	return false, "", ""
}

func (e *spfEval) matchHost(host string, ip netip.Addr, m spfMech) (bool, string, string) {
	qtype, bits := dns.TypeA, m.cidr4
	if ip.Is6() {
		qtype, bits = dns.TypeAAAA, m.cidr6
	}
	a, err := e.c.lookup(host, qtype)
	if err != nil {
		return false, spfTempError, err.Error()
	}
	for _, rr := range a.Records {
		var addr netip.Addr
		switch v := rr.(type) {
		case *dns.A:
			addr, _ = netip.AddrFromSlice(v.A.To4())
		case *dns.AAAA:
			addr, _ = netip.AddrFromSlice(v.AAAA)
		}
		if p, err := addr.Prefix(bits); err == nil && p.Contains(ip) {
			return true, "", ""
		}
	}
	return false, "", ""
}

func qualResult(q byte) string {
	switch q {
	case '-':
		return spfFail
	case '~':
		return spfSoftFail
	case '?':
		return spfNeutral
	}
	return spfPass
}
