package inmail

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"blitiri.com.ar/go/spf"
	"github.com/emersion/go-msgauth/authres"
	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-msgauth/dmarc"
	"golang.org/x/net/publicsuffix"

	"github.com/sendonce/sendonce/internal/core"
)

// Checker runs the receiving side's checks against one DNS server.
type Checker struct {
	// ServID names this server in Authentication-Results.
	ServID   string
	resolver *net.Resolver
	// Timeout bounds all the lookups of one message.
	Timeout time.Duration
}

// NewChecker asks dnsAddr ("host:port"); "" uses the system's resolver.
func NewChecker(servID, dnsAddr string) *Checker {
	r := net.DefaultResolver
	if dnsAddr != "" {
		r = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, dnsAddr)
		}}
	}
	return &Checker{ServID: servID, resolver: r, Timeout: 10 * time.Second}
}

// maxSignatures bounds the DKIM signatures verified per message: each
// costs a lookup and a verification a stranger chooses.
const maxSignatures = 5

// Check evaluates SPF for the client ip, its HELO name and MAIL FROM, the
// DKIM signatures of raw, and DMARC for the From domain. A lookup that
// fails is a temperror, never a rejection.
func (c *Checker) Check(ctx context.Context, ip net.IP, helo, mailFrom, from string, raw []byte) core.ReceivedAuth {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	var a core.ReceivedAuth
	var results []authres.Result

	spfRes, _ := spf.CheckHostWithSender(ip, helo, mailFrom, spf.WithResolver(c.resolver), spf.WithContext(ctx))
	a.SPF = string(spfRes)
	spfDomain := domainOf(mailFrom)
	if spfDomain == "" {
		spfDomain = strings.ToLower(helo)
	}
	results = append(results, &authres.SPFResult{Value: authres.ResultValue(a.SPF), From: mailFrom, Helo: helo})

	lookup := func(name string) ([]string, error) { return c.resolver.LookupTXT(ctx, name) }
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{LookupTXT: lookup, MaxVerifications: maxSignatures})
	var dkimPass []string
	a.DKIM = "none"
	switch {
	case err != nil && !errors.Is(err, dkim.ErrTooManySignatures):
		a.DKIM = "permerror"
	default:
		for _, v := range verifs {
			val := authres.ResultValue(authres.ResultPass)
			switch {
			case v.Err == nil:
				dkimPass = append(dkimPass, strings.ToLower(v.Domain))
			case dkim.IsTempFail(v.Err):
				val = authres.ResultTempError
			case dkim.IsPermFail(v.Err):
				val = authres.ResultPermError
			default:
				val = authres.ResultFail
			}
			results = append(results, &authres.DKIMResult{Value: val, Domain: v.Domain, Identifier: v.Identifier})
			if a.DKIM != "pass" {
				a.DKIM = string(val)
			}
		}
	}

	a.DMARC, a.DMARCFailed = c.dmarc(domainOf(from), a.SPF == "pass", spfDomain, dkimPass, lookup)
	results = append(results, &authres.DMARCResult{Value: authres.ResultValue(a.DMARC), From: domainOf(from)})
	a.Results = authres.Format(c.ServID, results)
	return a
}

// dmarc is RFC 7489's check: the From domain's policy (or its
// organizational domain's), passed by an aligned SPF or DKIM pass.
func (c *Checker) dmarc(fromDomain string, spfPass bool, spfDomain string, dkimPass []string, lookup func(string) ([]string, error)) (string, bool) {
	if fromDomain == "" {
		return "none", false
	}
	rec, err := dmarc.LookupWithOptions(fromDomain, &dmarc.LookupOptions{LookupTXT: lookup})
	if errors.Is(err, dmarc.ErrNoPolicy) {
		if org := orgDomain(fromDomain); org != fromDomain {
			rec, err = dmarc.LookupWithOptions(org, &dmarc.LookupOptions{LookupTXT: lookup})
		}
	}
	switch {
	case errors.Is(err, dmarc.ErrNoPolicy):
		return "none", false
	case err != nil && dmarc.IsTempFail(err):
		return "temperror", false
	case err != nil:
		return "permerror", false
	}
	if spfPass && aligned(rec.SPFAlignment, spfDomain, fromDomain) {
		return "pass", false
	}
	for _, d := range dkimPass {
		if aligned(rec.DKIMAlignment, d, fromDomain) {
			return "pass", false
		}
	}
	return "fail", true
}

func aligned(mode dmarc.AlignmentMode, d, from string) bool {
	if mode == dmarc.AlignmentStrict {
		return strings.EqualFold(d, from)
	}
	return d != "" && orgDomain(d) == orgDomain(from)
}

func orgDomain(d string) string {
	d = strings.ToLower(strings.TrimSuffix(d, "."))
	if org, err := publicsuffix.EffectiveTLDPlusOne(d); err == nil {
		return org
	}
	return d
}

// domainOf is the domain of an address ("Name <a@b>" or "a@b"), lower
// case; "" when there is none.
func domainOf(addr string) string {
	addr = strings.TrimSpace(addr)
	if i := strings.LastIndexByte(addr, '<'); i >= 0 {
		addr = strings.TrimSuffix(addr[i+1:], ">")
	}
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return ""
	}
	return strings.ToLower(strings.TrimSuffix(addr[at+1:], ">"))
}
