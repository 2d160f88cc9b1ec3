package dnscheck_test

import (
	"context"
	"crypto"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dkim"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// want is one expected finding: its check, level, and a piece of its
// message.
type want struct {
	check string
	level dnscheck.Level
	text  string
}

// expectFindings fails unless the report has exactly the wanted findings,
// in order, each with a fix when it is not ok.
func expectFindings(t *testing.T, rep *dnscheck.Report, wants []want) {
	t.Helper()
	ok := len(rep.Findings) == len(wants)
	for i := 0; ok && i < len(wants); i++ {
		f, w := rep.Findings[i], wants[i]
		ok = f.Check == w.check && f.Level == w.level && strings.Contains(f.Message, w.text)
	}
	if !ok {
		var b strings.Builder
		for _, w := range wants {
			b.WriteString("  " + w.check + " " + string(w.level) + " …" + w.text + "…\n")
		}
		t.Fatalf("findings differ.\ngot:\n%s\nwant:\n%s", rep.Text(), b.String())
	}
	checkFixes(t, rep)
}

// checkFixes asserts that every warning and error says how to fix it and
// every finding is one or more sentences.
func checkFixes(t *testing.T, rep *dnscheck.Report) {
	t.Helper()
	for _, f := range rep.Findings {
		if (f.Level == dnscheck.OK) != (f.Fix == "") {
			t.Errorf("finding %q (%s) has fix %q", f.Message, f.Level, f.Fix)
		}
		for _, s := range []string{f.Message, f.Fix} {
			if s != "" && !strings.HasSuffix(s, ".") {
				t.Errorf("%q is not a sentence", s)
			}
		}
	}
}

// has reports whether the report has a finding like w.
func has(rep *dnscheck.Report, w want) bool {
	for _, f := range rep.Findings {
		if f.Check == w.check && f.Level == w.level && strings.Contains(f.Message, w.text) {
			return true
		}
	}
	return false
}

func expectHas(t *testing.T, rep *dnscheck.Report, wants ...want) {
	t.Helper()
	for _, w := range wants {
		if !has(rep, w) {
			t.Errorf("no %s %s finding containing %q in:\n%s", w.check, w.level, w.text, rep.Text())
		}
	}
	checkFixes(t, rep)
}

func fixtures(t *testing.T) *dnstest.Server {
	t.Helper()
	return dnstest.StartWithOptions(t, dnstest.Options{ZoneFile: "testdata/fixtures.zone"})
}

func fixtureKey(t *testing.T) crypto.PublicKey {
	t.Helper()
	b, err := os.ReadFile("testdata/dkim-s1.pem")
	if err != nil {
		t.Fatal(err)
	}
	k, err := dkim.ParsePEM(b)
	if err != nil {
		t.Fatal(err)
	}
	return k.Public()
}

func check(t *testing.T, opts dnscheck.Options) *dnscheck.Report {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	rep, err := dnscheck.Check(context.Background(), opts)
	if err != nil {
		t.Fatalf("Check(%s): %v", opts.Domain, err)
	}
	return rep
}

// The fixture zones of the issue, each finding asserted.
func TestCheckFixtures(t *testing.T) {
	srv := fixtures(t)
	key := fixtureKey(t)
	const (
		mx, spf, dk, dm = dnscheck.CheckMX, dnscheck.CheckSPF, dnscheck.CheckDKIM, dnscheck.CheckDMARC
		ok, warn, fail  = dnscheck.OK, dnscheck.Warning, dnscheck.Error
	)
	// The ends of every fixture but good.test: DKIM and DMARC right.
	dkimOK := []want{{dk, ok, "is RSA of 2048 bits"}, {dk, ok, "is the one sendonce signs"}}
	dmarcOK := func(d string) []want {
		return []want{
			{dm, ok, "_dmarc." + d + " has one DMARC record"},
			{dm, ok, "policy for " + d + " is p=reject"},
			{dm, ok, "Aggregate reports (rua) go to dmarc-reports@" + d},
			{dm, ok, "DKIM aligns"},
			{dm, ok, "aligns with the From domain " + d + " for SPF"},
		}
	}
	cat := func(parts ...[]want) []want {
		var out []want
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		domain string
		opts   dnscheck.Options
		want   []want
	}{
		{"good.test", dnscheck.Options{RelayIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, RelayHost: "smtp.relay.test"}, []want{
			{mx, ok, "good.test has 2 mail exchangers: mx1.good.test (preference 10), mx2.good.test (preference 20)."},
			{spf, ok, `good.test has one SPF record: "v=spf1 ip4:192.0.2.10 include:_spf.relay.test -all".`},
			{spf, ok, "uses 1 of the 10 DNS lookups"},
			{spf, ok, "ends with -all"},
			{spf, ok, `SPF passes for the relay (192.0.2.10): "ip4:192.0.2.10" matches`},
			{spf, ok, `SPF passes for the relay smtp.relay.test (198.51.100.25): "include:_spf.relay.test" matches`},
			{dk, ok, "The DKIM key at s1._domainkey.good.test is RSA of 2048 bits."},
			{dk, ok, "The published key is the one sendonce signs good.test's mail with."},
			{dm, ok, `_dmarc.good.test has one DMARC record: "v=DMARC1; p=quarantine; rua=mailto:dmarc-reports@good.test".`},
			{dm, ok, "The DMARC policy for good.test is p=quarantine."},
			{dm, ok, "Aggregate reports (rua) go to dmarc-reports@good.test."},
			{dm, ok, "sendonce signs with d=good.test, the From domain, so DKIM aligns (relaxed alignment)."},
			{dm, ok, "The envelope sender domain good.test aligns with the From domain good.test for SPF (relaxed alignment)."},
		}},
		{"twospf.test", dnscheck.Options{}, cat([]want{
			{mx, ok, "twospf.test has 1 mail exchanger: mx.twospf.test (preference 10)."},
			{spf, fail, "twospf.test has 2 SPF records; receivers treat that as a permanent error"},
		}, dkimOK, dmarcOK("twospf.test"))},
		{"toomany.test", dnscheck.Options{}, cat([]want{
			{mx, ok, "toomany.test has 1 mail exchanger"},
			{spf, ok, "toomany.test has one SPF record"},
			{spf, fail, "needs 13 DNS lookups"},
			{spf, ok, "ends with ~all"},
		}, dkimOK, dmarcOK("toomany.test"))},
		{"weakdkim.test", dnscheck.Options{}, cat([]want{
			{mx, ok, "weakdkim.test has 1 mail exchanger"},
			{spf, ok, "weakdkim.test has one SPF record"},
			{spf, ok, "uses 0 of the 10 DNS lookups"},
			{spf, ok, "ends with -all"},
			{dk, fail, "The DKIM key at s1._domainkey.weakdkim.test is RSA of 512 bits: receivers ignore signatures made with keys under 1024 bits"},
			{dk, fail, "is not the one sendonce signs with"},
		}, dmarcOK("weakdkim.test"))},
		{"nodmarc.test", dnscheck.Options{}, cat([]want{
			{mx, ok, "nodmarc.test has 1 mail exchanger"},
			{spf, ok, "nodmarc.test has one SPF record"},
			{spf, ok, "uses 0 of the 10 DNS lookups"},
			{spf, ok, "ends with -all"},
		}, dkimOK, []want{
			{dm, fail, "There is no DMARC record at _dmarc.nodmarc.test"},
		})},
		{"cname.test", dnscheck.Options{}, cat([]want{
			{mx, ok, "cname.test has 1 mail exchanger"},
			{spf, ok, "cname.test has one SPF record"},
			{spf, ok, "uses 1 of the 10 DNS lookups"},
			{spf, ok, "ends with -all"},
			{dk, ok, "s1._domainkey.cname.test is an alias (CNAME) of s1.dkim.provider.test; the key was read there."},
			{dk, ok, "The DKIM key at s1.dkim.provider.test is RSA of 2048 bits."},
			{dk, ok, "is the one sendonce signs"},
		}, dmarcOK("cname.test"))},
	}
	for _, tt := range tests {
		t.Run(tt.domain, func(t *testing.T) {
			t.Parallel()
			opts := tt.opts
			opts.Domain, opts.Selector, opts.Resolver, opts.ExpectedDKIMKey = tt.domain, "s1", srv.Addr(), key
			rep := check(t, opts)
			expectFindings(t, rep, tt.want)
		})
	}
}

// The CNAME'd DKIM record is followed also when the resolver answers with
// the alias only.
func TestCheckDKIMCNAMEQueriedSeparately(t *testing.T) {
	srv := dnstest.StartWithOptions(t, dnstest.Options{ZoneFile: "testdata/fixtures.zone", NoCNAMEChase: true})
	rep := check(t, dnscheck.Options{Domain: "cname.test", Selector: "s1", Resolver: srv.Addr(), ExpectedDKIMKey: fixtureKey(t)})
	expectHas(t, rep,
		want{dnscheck.CheckDKIM, dnscheck.OK, "is an alias (CNAME) of s1.dkim.provider.test"},
		want{dnscheck.CheckDKIM, dnscheck.OK, "is the one sendonce signs"},
	)
	var sawTarget bool
	for _, q := range srv.Queries() {
		sawTarget = sawTarget || q.Name == "s1.dkim.provider.test." && q.Type == "TXT"
	}
	if !sawTarget {
		t.Errorf("the alias target was not queried: %+v", srv.Queries())
	}
}

func TestCheckTCPFallback(t *testing.T) {
	srv := dnstest.StartWithOptions(t, dnstest.Options{ZoneFile: "testdata/fixtures.zone", TruncateUDP: true})
	rep := check(t, dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: srv.Addr()})
	if rep.Level() != dnscheck.OK {
		t.Fatalf("report over TCP:\n%s", rep.Text())
	}
	var udp, tcp int
	for _, q := range srv.Queries() {
		if q.Net == "udp" {
			udp++
		} else {
			tcp++
		}
	}
	if udp == 0 || udp != tcp {
		t.Errorf("udp=%d tcp=%d queries; want each truncated UDP query retried over TCP", udp, tcp)
	}
}

func TestCheckTextGolden(t *testing.T) {
	srv := fixtures(t)
	for _, d := range []string{"good.test", "toomany.test"} {
		rep := check(t, dnscheck.Options{Domain: d, Selector: "s1", Resolver: srv.Addr(), ExpectedDKIMKey: fixtureKey(t), RelayHost: "smtp.relay.test"})
		rep.Resolver = "127.0.0.1:5353" // the test server's port changes
		got := rep.Text()
		path := "testdata/" + d + ".txt"
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		wantText, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if got != string(wantText) {
			t.Errorf("Text() of %s differs from %s:\n%s", d, path, got)
		}
	}
}

func TestReportJSON(t *testing.T) {
	srv := fixtures(t)
	rep := check(t, dnscheck.Options{Domain: "nodmarc.test", Selector: "s1", Resolver: srv.Addr()})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Domain   string `json:"domain"`
		Selector string `json:"selector"`
		Resolver string `json:"resolver"`
		Findings []struct {
			Check, Level, Message, Fix string
		} `json:"findings"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Domain != "nodmarc.test" || back.Selector != "s1" || back.Resolver != srv.Addr() || len(back.Findings) != len(rep.Findings) {
		t.Fatalf("JSON = %s", b)
	}
	last := back.Findings[len(back.Findings)-1]
	if last.Check != "dmarc" || last.Level != "error" || last.Fix == "" {
		t.Errorf("last finding = %+v", last)
	}
	if !regexp.MustCompile(`"level":"ok","message":"[^"]*"}`).Match(b) {
		t.Errorf("ok findings should omit fix: %s", b)
	}
	if rep.Level() != dnscheck.Error || rep.Count(dnscheck.Error) != 1 {
		t.Errorf("Level=%s errors=%d", rep.Level(), rep.Count(dnscheck.Error))
	}
}

// The sample in docs/deliverability.md is the golden output.
func TestDocsSampleIsCurrent(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deliverability.md")
	if err != nil {
		t.Fatal(err)
	}
	sample, err := os.ReadFile("testdata/toomany.test.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```text\n"+string(sample)+"```") {
		t.Error("docs/deliverability.md does not show testdata/toomany.test.txt; copy it over")
	}
}
