package dnscheck

// SPF records as text: parsing and the syntax checks (RFC 7208).

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
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
