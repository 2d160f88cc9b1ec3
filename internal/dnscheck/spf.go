package dnscheck

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

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
