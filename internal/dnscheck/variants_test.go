package dnscheck_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dkim"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

const (
	mx, spf, dk, dm = dnscheck.CheckMX, dnscheck.CheckSPF, dnscheck.CheckDKIM, dnscheck.CheckDMARC
	ok, warn, fail  = dnscheck.OK, dnscheck.Warning, dnscheck.Error
)

// base is ex.test with a mail exchanger; cases add what they test.
var base = []string{
	"ex.test. MX 10 mx.ex.test.",
	"mx.ex.test. A 192.0.2.1",
}

// run checks opts.Domain (default ex.test) against a server serving base
// plus records.
func run(t *testing.T, opts dnscheck.Options, records ...string) *dnscheck.Report {
	t.Helper()
	srv := dnstest.Start(t, append(append([]string(nil), base...), records...)...)
	if opts.Domain == "" {
		opts.Domain = "ex.test"
	}
	opts.Resolver = srv.Addr()
	return check(t, opts)
}

func TestCheckMX(t *testing.T) {
	tests := []struct {
		name    string
		domain  string
		records []string
		want    []want
	}{
		{"null MX", "null.test", []string{"null.test. MX 0 ."}, []want{{mx, fail, "publishes a null MX (RFC 7505)"}}},
		{"null MX mixed", "mixed.test", []string{"mixed.test. MX 0 .", "mixed.test. MX 10 mx.ex.test."}, []want{
			{mx, fail, "mixes a null MX"}, {mx, ok, "mixed.test has 1 mail exchanger: mx.ex.test"}}},
		{"no MX, address", "amx.test", []string{"amx.test. A 192.0.2.9"}, []want{{mx, warn, "has no MX record; mail to it goes to its address record (192.0.2.9)"}}},
		{"no MX, no address", "nomx.test", []string{"nomx.test. TXT \"v=spf1 -all\""}, []want{{mx, fail, "has no MX record and no address record"}}},
		{"host without address", "lame.test", []string{"lame.test. MX 10 gone.lame.test.", "lame.test. MX 20 mx.ex.test."}, []want{
			{mx, ok, "lame.test has 2 mail exchangers: gone.lame.test (preference 10), mx.ex.test (preference 20)."},
			{mx, fail, "The mail exchanger gone.lame.test has no A or AAAA record"}}},
		{"host is an alias", "alias.test", []string{"alias.test. MX 10 mail.alias.test.", "mail.alias.test. CNAME mx.ex.test."}, []want{
			{mx, warn, "mail.alias.test is an alias (CNAME) of mx.ex.test"}}},
		{"host is an IP", "ipmx.test", []string{"ipmx.test. MX 10 192.0.2.1."}, []want{{mx, fail, "names the IP address 192.0.2.1"}}},
		{"IPv6 only host", "v6.test", []string{"v6.test. MX 10 mx6.v6.test.", "mx6.v6.test. AAAA 2001:db8::25"}, []want{{mx, ok, "v6.test has 1 mail exchanger"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rep := run(t, dnscheck.Options{Domain: tt.domain}, tt.records...)
			expectHas(t, rep, tt.want...)
			if tt.name == "IPv6 only host" && has(rep, want{mx, fail, ""}) {
				t.Errorf("IPv6-only MX host reported as an error:\n%s", rep.Text())
			}
		})
	}
}

func TestCheckNXDOMAINStops(t *testing.T) {
	rep := run(t, dnscheck.Options{Domain: "missing.test", Selector: "s1"})
	expectFindings(t, rep, []want{{mx, fail, "missing.test does not exist in DNS (NXDOMAIN)"}})
}

func TestCheckSPF(t *testing.T) {
	tests := []struct {
		name    string
		records []string
		opts    dnscheck.Options
		want    []want
	}{
		{"none", []string{`ex.test. TXT "not spf"`}, dnscheck.Options{}, []want{{spf, fail, "ex.test has no SPF record"}}},
		{"v=spf10 is not SPF", []string{`ex.test. TXT "v=spf10 -all"`}, dnscheck.Options{}, []want{{spf, fail, "has no SPF record"}}},
		{"+all", []string{`ex.test. TXT "v=spf1 mx +all"`}, dnscheck.Options{}, []want{{spf, fail, "ends with +all: every server on the Internet passes SPF"}}},
		{"bare all", []string{`ex.test. TXT "v=spf1 mx all"`}, dnscheck.Options{}, []want{{spf, fail, "ends with all: every server"}}},
		{"?all", []string{`ex.test. TXT "v=spf1 mx ?all"`}, dnscheck.Options{}, []want{{spf, warn, "ends with ?all (neutral)"}}},
		{"no all", []string{`ex.test. TXT "v=spf1 mx"`}, dnscheck.Options{}, []want{{spf, warn, "has no all mechanism, so servers it does not list get a neutral result"}}},
		{"all through redirect", []string{`ex.test. TXT "v=spf1 redirect=_spf.ex.test"`, `_spf.ex.test. TXT "v=spf1 ip4:192.0.2.0/24 -all"`}, dnscheck.Options{}, []want{
			{spf, ok, "uses 1 of the 10 DNS lookups"}, {spf, ok, "ends with -all (through redirect=_spf.ex.test)"}}},
		{"redirect ignored with all", []string{`ex.test. TXT "v=spf1 mx -all redirect=_spf.ex.test"`}, dnscheck.Options{}, []want{
			{spf, ok, "uses 1 of the 10 DNS lookups"}, {spf, ok, "ends with -all:"}}},
		{"syntax errors", []string{`ex.test. TXT "v=spf1 ip4:300.1.1.1 include mx/33 foo:bar ip6:192.0.2.1 a:nodot redirect=a.test redirect=b.test exp=x.test exp=y.test -all"`}, dnscheck.Options{}, []want{
			{spf, fail, `"ip4:300.1.1.1": not a valid IPv4 address`},
			{spf, fail, `"include": include needs a domain`},
			{spf, fail, `"mx/33": invalid IPv4 prefix length /33`},
			{spf, fail, `"foo:bar": unknown mechanism "foo"`},
			{spf, fail, `"ip6:192.0.2.1": not a valid IPv6 address`},
			{spf, fail, `"a:nodot": not a valid domain name`},
			{spf, fail, "redirect= appears more than once"},
			{spf, fail, "exp= appears more than once"},
		}},
		{"valid oddities", []string{`ex.test. TXT "v=spf1 a/24 mx:ex.test/24//64 a//48 ip6:2001:db8::/32 ip4:192.0.2.1 custom=x -all"`}, dnscheck.Options{}, []want{
			{spf, ok, "uses 3 of the 10 DNS lookups"}}},
		{"macros", []string{`ex.test. TXT "v=spf1 exists:%{i}._spf.%{d} -all"`}, dnscheck.Options{RelayIPs: []netip.Addr{netip.MustParseAddr("192.0.2.7")}}, []want{
			{spf, ok, "uses 1 of the 10 DNS lookups"},
			{spf, ok, "uses macros, which need a message to expand"},
			{spf, warn, "could not be determined"}}},
		{"bad macro", []string{`ex.test. TXT "v=spf1 exists:%{x}.ex.test -all"`}, dnscheck.Options{}, []want{{spf, fail, "malformed macro"}}},
		{"ptr", []string{`ex.test. TXT "v=spf1 ptr -all"`}, dnscheck.Options{}, []want{{spf, warn, `uses "ptr", which RFC 7208 section 5.5 says not to use`}}},
		{"terms after all", []string{`ex.test. TXT "v=spf1 -all ip4:192.0.2.1"`}, dnscheck.Options{}, []want{{spf, warn, "has terms after its all mechanism (ip4:192.0.2.1)"}}},
		{"close to the limit", []string{`ex.test. TXT "v=spf1 a mx a:a.ex.test a:b.ex.test a:c.ex.test a:d.ex.test a:e.ex.test a:f.ex.test -all"`}, dnscheck.Options{}, []want{
			{spf, warn, "uses 8 of the 10 DNS lookups"}}},
		{"exactly the limit", []string{`ex.test. TXT "v=spf1 a mx ptr exists:x.ex.test include:i.ex.test -all"`, `i.ex.test. TXT "v=spf1 a a:x.ex.test mx:x.ex.test a:y.ex.test redirect=j.ex.test"`, `j.ex.test. TXT "v=spf1 ip4:192.0.2.1 -all"`}, dnscheck.Options{}, []want{
			{spf, warn, "uses 10 of the 10 DNS lookups"}}},
		{"include without SPF", []string{`ex.test. TXT "v=spf1 include:nospf.ex.test -all"`, `nospf.ex.test. TXT "hello"`}, dnscheck.Options{}, []want{
			{spf, fail, "has include:nospf.ex.test, but nospf.ex.test has no SPF record"}}},
		{"include of two records", []string{`ex.test. TXT "v=spf1 include:two.ex.test -all"`, `two.ex.test. TXT "v=spf1 -all"`, `two.ex.test. TXT "v=spf1 ~all"`}, dnscheck.Options{}, []want{
			{spf, fail, "but two.ex.test has 2 SPF records"}}},
		{"include with syntax error", []string{`ex.test. TXT "v=spf1 include:bad.ex.test -all"`, `bad.ex.test. TXT "v=spf1 ip4:nope -all"`}, dnscheck.Options{}, []want{
			{spf, fail, "has include:bad.ex.test, whose record has a syntax error"}}},
		{"include loop", []string{`ex.test. TXT "v=spf1 include:l1.ex.test -all"`, `l1.ex.test. TXT "v=spf1 include:l2.ex.test -all"`, `l2.ex.test. TXT "v=spf1 include:l1.ex.test -all"`}, dnscheck.Options{}, []want{
			{spf, fail, "loops: ex.test → l1.ex.test → l2.ex.test → l1.ex.test"}}},
		{"relay covered by a and mx", []string{`ex.test. TXT "v=spf1 a:relay.ex.test mx/24 -all"`, "relay.ex.test. A 192.0.2.77", "relay.ex.test. AAAA 2001:db8::77"},
			dnscheck.Options{RelayIPs: []netip.Addr{netip.MustParseAddr("192.0.2.200")}, RelayHost: "relay.ex.test"}, []want{
				{spf, ok, `SPF passes for the relay (192.0.2.200): "mx/24" matches`},
				{spf, ok, `SPF passes for the relay relay.ex.test (192.0.2.77): "a:relay.ex.test" matches`},
				{spf, ok, `SPF passes for the relay relay.ex.test (2001:db8::77): "a:relay.ex.test" matches`}}},
		{"relay not covered", []string{`ex.test. TXT "v=spf1 ip4:192.0.2.1 include:_spf.ex.test ~all"`, `_spf.ex.test. TXT "v=spf1 ip4:198.51.100.0/24 -all"`},
			dnscheck.Options{RelayIPs: []netip.Addr{netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("2001:db8::5")}}, []want{
				{spf, fail, `SPF gives softfail for the relay (203.0.113.5) because "~all" matches in the record of ex.test`},
				{spf, fail, `SPF gives softfail for the relay (2001:db8::5)`}}},
		{"relay explicitly failed", []string{`ex.test. TXT "v=spf1 -ip4:203.0.113.5 +all"`},
			dnscheck.Options{RelayIPs: []netip.Addr{netip.MustParseAddr("203.0.113.5")}}, []want{
				{spf, fail, `SPF gives fail for the relay (203.0.113.5) because "-ip4:203.0.113.5" matches`}}},
		{"relay with no default", []string{`ex.test. TXT "v=spf1 ip4:192.0.2.1"`},
			dnscheck.Options{RelayIPs: []netip.Addr{netip.MustParseAddr("203.0.113.5")}}, []want{
				{spf, fail, "SPF gives neutral for the relay (203.0.113.5) because no mechanism"}}},
		{"relay host without address", []string{`ex.test. TXT "v=spf1 -all"`}, dnscheck.Options{RelayHost: "nowhere.ex.test"}, []want{
			{spf, warn, "The relay host nowhere.ex.test has no address record"}}},
		{"relay given as an address", []string{`ex.test. TXT "v=spf1 ip6:2001:db8::/32 -all"`}, dnscheck.Options{RelayHost: "2001:db8::9"}, []want{
			{spf, ok, "SPF passes for the relay (2001:db8::9)"}}},
		{"relay through redirect", []string{`ex.test. TXT "v=spf1 redirect=_spf.ex.test"`, `_spf.ex.test. TXT "v=spf1 ip4:203.0.113.0/24 -all"`},
			dnscheck.Options{RelayIPs: []netip.Addr{netip.MustParseAddr("203.0.113.5")}}, []want{
				{spf, ok, `SPF passes for the relay (203.0.113.5): "ip4:203.0.113.0/24" matches in the record of _spf.ex.test`}}},
		{"relay include target missing", []string{`ex.test. TXT "v=spf1 include:gone.ex.test -all"`},
			dnscheck.Options{RelayIPs: []netip.Addr{netip.MustParseAddr("203.0.113.5")}}, []want{
				{spf, fail, "gone.ex.test has no SPF record"},
				{spf, fail, "SPF gives permerror for the relay (203.0.113.5) because include:gone.ex.test names a domain without SPF record"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rep := run(t, tt.opts, tt.records...)
			expectHas(t, rep, tt.want...)
		})
	}
}

func TestCheckSPFDeepIncludesAreBounded(t *testing.T) {
	// A chain of 40 includes: the count stops past 30 and says "at least".
	var recs []string
	recs = append(recs, `ex.test. TXT "v=spf1 include:i0.ex.test -all"`)
	for i := range 40 {
		recs = append(recs, "i"+itoa(i)+`.ex.test. TXT "v=spf1 include:i`+itoa(i+1)+`.ex.test -all"`)
	}
	srv := dnstest.Start(t, append(append([]string(nil), base...), recs...)...)
	rep := check(t, dnscheck.Options{Domain: "ex.test", Resolver: srv.Addr()})
	expectHas(t, rep, want{spf, fail, "needs at least 11 DNS lookups"})
	if n := len(srv.Queries()); n > 30 {
		t.Errorf("%d queries for a chain the limit cuts at 10", n)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestCheckDKIM(t *testing.T) {
	fixture := fixtureKey(t)
	k1024, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&k1024.PublicKey)
	p1024 := base64.StdEncoding.EncodeToString(der)
	ed, err := dkim.GenerateKey(dkim.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	edRec, _ := ed.DNSRecord("s1", "ex.test")
	tests := []struct {
		name     string
		selector string
		expected bool
		records  []string
		want     []want
	}{
		{"no selector", "", false, nil, []want{{dk, warn, "No DKIM selector was given"}}},
		{"no record", "s1", false, nil, []want{{dk, fail, "There is no DKIM key record at s1._domainkey.ex.test"}}},
		{"no key among TXT", "s1", false, []string{`s1._domainkey.ex.test. TXT "v=DKIM1; k=rsa; p=" "%%%"`}, []want{{dk, fail, "does not parse: the p= tag is not valid base64"}}},
		{"two records", "s1", false, []string{`s1._domainkey.ex.test. TXT "v=DKIM1; p=` + p1024 + `"`, `s1._domainkey.ex.test. TXT "v=DKIM1; p="`}, []want{{dk, fail, "has 2 TXT records"}}},
		{"revoked", "s1", false, []string{`s1._domainkey.ex.test. TXT "v=DKIM1; k=rsa; p="`}, []want{{dk, fail, "is revoked (empty p=)"}}},
		{"1024 bits", "s1", false, []string{`s1._domainkey.ex.test. TXT "v=DKIM1; k=rsa; p=` + p1024 + `"`}, []want{{dk, warn, "is RSA of 1024 bits; 2048 bits is recommended"}}},
		{"ed25519", "s1", false, []string{edRec.ZoneLine()}, []want{{dk, ok, "s1._domainkey.ex.test is Ed25519"}, {dk, warn, "Not every receiver verifies Ed25519"}}},
		{"testing", "s1", false, []string{`s1._domainkey.ex.test. TXT "v=DKIM1; t=y; p=` + p1024 + `"`}, []want{{dk, warn, "is in test mode (t=y)"}}},
		{"sha1 only", "s1", false, []string{`s1._domainkey.ex.test. TXT "v=DKIM1; h=sha1; p=` + p1024 + `"`}, []want{{dk, fail, "allows only h=[sha1]"}}},
		{"other service", "s1", false, []string{`s1._domainkey.ex.test. TXT "v=DKIM1; s=tlsrpt; p=` + p1024 + `"`}, []want{{dk, fail, "restricted to services [tlsrpt]"}}},
		{"wrong key", "s1", true, []string{`s1._domainkey.ex.test. TXT "v=DKIM1; p=` + p1024 + `"`}, []want{{dk, fail, "is not the one sendonce signs with"}}},
		{"alias to nothing", "s1", false, []string{"s1._domainkey.ex.test. CNAME s1.gone.test."}, []want{{dk, fail, "is an alias (CNAME) of s1.gone.test, which does not exist"}}},
		{"alias to a name without TXT", "s1", false, []string{"s1._domainkey.ex.test. CNAME mx.ex.test."}, []want{{dk, ok, "is an alias (CNAME) of mx.ex.test"}, {dk, fail, "There is no DKIM key record at mx.ex.test"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := dnscheck.Options{Selector: tt.selector}
			if tt.expected {
				opts.ExpectedDKIMKey = fixture
			}
			rep := run(t, opts, tt.records...)
			expectHas(t, rep, tt.want...)
		})
	}
}

func TestCheckDMARC(t *testing.T) {
	tests := []struct {
		name    string
		domain  string
		env     string
		records []string
		want    []want
	}{
		{"p=none", "", "", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=none; rua=mailto:d@ex.test"`}, []want{{dm, warn, "is p=none: receivers only report"}}},
		{"sp=none and pct", "", "", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=reject; sp=none; pct=50; rua=mailto:d@ex.test"`}, []want{
			{dm, ok, "is p=reject"}, {dm, warn, "sets sp=none"}, {dm, warn, "has pct=50: the policy applies to only 50%"}}},
		{"two records", "", "", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=none"`, `_dmarc.ex.test. TXT "v=DMARC1; p=reject"`}, []want{{dm, fail, "has 2 DMARC records"}}},
		{"invalid tags", "", "", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=block; sp=x; pct=150; adkim=q; aspf=; ri=soon; fo=2; p=none; junk"`}, []want{
			{dm, fail, "p=block is not valid"}, {dm, fail, "sp=x is not valid"}, {dm, fail, "pct=150 is not valid"},
			{dm, fail, "adkim=q is not valid"}, {dm, fail, "aspf= is not valid"}, {dm, fail, "ri=soon is not valid"}, {dm, fail, "fo=2 is not valid"},
			{dm, fail, "the p= tag appears twice"}, {dm, fail, `"junk" is not a tag=value pair`}}},
		{"no p", "", "", []string{`_dmarc.ex.test. TXT "v=DMARC1; rua=mailto:d@ex.test"`}, []want{{dm, fail, "there is no p= tag"}}},
		{"v not first", "", "", []string{`_dmarc.ex.test. TXT "v=DMARC1p=reject"`}, []want{{dm, fail, "must start with v=DMARC1"}}},
		{"no rua", "", "", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=reject"`}, []want{{dm, warn, "has no rua= tag"}}},
		{"bad report URIs", "", "", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=reject; rua=https://ex.test/r,mailto:not an address,mailto:a@ex.test!big; ruf=mailto:f@ex.test!10m"`}, []want{
			{dm, fail, `has "https://ex.test/r", which is not a mailto: URI`},
			{dm, fail, `has "mailto:not an address", which is not a valid mailto: URI`},
			{dm, fail, `has "mailto:a@ex.test!big", which is not a valid mailto: URI`},
			{dm, ok, "Failure reports (ruf) go to f@ex.test"}}},
		{"external reports unauthorized", "", "", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=reject; rua=mailto:r@reports.example,mailto:d@ex.test"`}, []want{
			{dm, ok, "Aggregate reports (rua) go to r@reports.example, d@ex.test."},
			{dm, warn, "has not published ex.test._report._dmarc.reports.example"}}},
		{"external reports authorized", "", "", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=reject; rua=mailto:r@reports.example"`, `ex.test._report._dmarc.reports.example. TXT "v=DMARC1"`}, []want{
			{dm, ok, "Aggregate reports (rua) go to r@reports.example."}}},
		{"inherited from the organizational domain", "mail.ex.test", "", []string{"mail.ex.test. MX 10 mx.ex.test.", `_dmarc.ex.test. TXT "v=DMARC1; p=reject; sp=quarantine; rua=mailto:d@ex.test"`}, []want{
			{dm, ok, "mail.ex.test has no DMARC record of its own; the record of its organizational domain applies"},
			{dm, ok, "The DMARC policy for mail.ex.test is sp=quarantine."},
			{dm, ok, "sendonce signs with d=mail.ex.test"}}},
		{"missing at both", "mail.ex.test", "", []string{"mail.ex.test. MX 10 mx.ex.test."}, []want{{dm, fail, "There is no DMARC record at _dmarc.mail.ex.test"}}},
		{"relaxed SPF alignment", "", "bounces.ex.test", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=reject; rua=mailto:d@ex.test"`}, []want{
			{dm, ok, "The envelope sender domain bounces.ex.test aligns with the From domain ex.test for SPF (relaxed alignment)."}}},
		{"strict SPF alignment", "", "bounces.ex.test", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=reject; aspf=s; adkim=s; rua=mailto:d@ex.test"`}, []want{
			{dm, ok, "so DKIM aligns (strict alignment)"},
			{dm, warn, "The envelope sender domain bounces.ex.test does not align with the From domain ex.test (strict SPF alignment)"}}},
		{"other envelope domain", "", "relay.example", []string{`_dmarc.ex.test. TXT "v=DMARC1; p=reject; rua=mailto:d@ex.test"`}, []want{
			{dm, warn, "relay.example does not align"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rep := run(t, dnscheck.Options{Domain: tt.domain, EnvelopeDomain: tt.env}, tt.records...)
			expectHas(t, rep, tt.want...)
		})
	}
}

func TestCheckServFail(t *testing.T) {
	srv := dnstest.StartWithOptions(t, dnstest.Options{ZoneFile: "testdata/fixtures.zone", ServFail: []string{"_dmarc.good.test"}})
	rep := check(t, dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: srv.Addr()})
	expectHas(t, rep, want{dm, fail, "DNS lookup failed: TXT _dmarc.good.test: the resolver answered SERVFAIL"})
	if has(rep, want{dk, fail, ""}) || has(rep, want{spf, fail, ""}) {
		t.Errorf("a SERVFAIL for one name affected other checks:\n%s", rep.Text())
	}
}

func TestCheckResolverDown(t *testing.T) {
	// A UDP port with nothing behind it: the first query fails at once
	// (connection refused) and the others do not try again.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	start := time.Now()
	rep, err := dnscheck.Check(context.Background(), dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: addr, QueryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Check took %v against a dead resolver", d)
	}
	if rep.Level() != dnscheck.Error || !strings.Contains(rep.Findings[0].Message, "resolver unreachable") {
		t.Fatalf("report:\n%s", rep.Text())
	}
	checkFixes(t, rep)
}

func TestCheckTimeout(t *testing.T) {
	// A resolver that never answers: the whole check stops at Timeout.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	start := time.Now()
	rep, err := dnscheck.Check(context.Background(), dnscheck.Options{Domain: "good.test", Resolver: pc.LocalAddr().String(), Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Check took %v with a 300ms timeout", d)
	}
	if rep.Level() != dnscheck.Error {
		t.Fatalf("report:\n%s", rep.Text())
	}
	if f := rep.Findings[0]; !strings.Contains(f.Fix, "longer timeout") {
		t.Errorf("fix = %q", f.Fix)
	}
}

func TestCheckCancelled(t *testing.T) {
	srv := fixtures(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := dnscheck.Check(ctx, dnscheck.Options{Domain: "good.test", Resolver: srv.Addr()}); !errors.Is(err, context.Canceled) {
		t.Errorf("Check with a cancelled context = %v", err)
	}
}

func TestCheckOptionErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.conf")
	os.WriteFile(empty, []byte("# nothing\n"), 0o644)
	for _, opts := range []dnscheck.Options{
		{},
		{Domain: "localhost", Resolver: "127.0.0.1:53"},
		{Domain: "exa mple.com", Resolver: "127.0.0.1:53"},
		{Domain: "example.com", Selector: "s 1", Resolver: "127.0.0.1:53"},
		{Domain: "example.com", Resolver: "bad host/x"},
		{Domain: "example.com", EnvelopeDomain: "nope", Resolver: "127.0.0.1:53"},
		{Domain: "example.com", ResolvConf: filepath.Join(dir, "missing.conf")},
		{Domain: "example.com", ResolvConf: empty},
	} {
		if _, err := dnscheck.Check(context.Background(), opts); err == nil {
			t.Errorf("Check(%+v) succeeded", opts)
		}
	}
}

// A bare host in Options.Resolver gets port 53. (The default resolver is
// read from resolv.conf, which cannot name a port: resolver_test.go tests
// that without sending queries to port 53.)
func TestCheckAcceptsBareResolverHost(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, r := range []string{"[::1]", "::1", "127.0.0.1"} {
		_, err := dnscheck.Check(ctx, dnscheck.Options{Domain: "good.test", Resolver: r})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Check(resolver %q) = %v, want only the cancellation", r, err)
		}
	}
}
