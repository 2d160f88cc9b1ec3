package dnscheck_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

// ruled is one expected finding of the bulk section: its rule, level and
// a piece of its message.
type ruled struct {
	rule  string
	level dnscheck.Level
	text  string
}

// expectRules fails unless the report's bulk section has a finding like
// each of wants, and every one of its findings names a rule.
func expectRules(t *testing.T, rep *dnscheck.Report, wants ...ruled) {
	t.Helper()
	for _, w := range wants {
		found := false
		for _, f := range rep.Findings {
			found = found || f.Check == dnscheck.CheckBulk && f.Rule == w.rule && f.Level == w.level && strings.Contains(f.Message, w.text)
		}
		if !found {
			t.Errorf("no bulk %s %s finding containing %q in:\n%s", w.rule, w.level, w.text, rep.Text())
		}
	}
	for _, f := range rep.Findings {
		if (f.Check == dnscheck.CheckBulk) != (f.Rule != "") {
			t.Errorf("finding %+v: a rule belongs to the bulk section, and only there", f)
		}
	}
	checkFixes(t, rep)
}

// bulkZone is the fixtures plus an envelope domain with and without SPF.
func bulkZone(t *testing.T, records ...string) *dnstest.Server {
	t.Helper()
	return dnstest.StartWithOptions(t, dnstest.Options{ZoneFile: "testdata/fixtures.zone", Records: append([]string{
		`bounces.good.test. TXT "v=spf1 ip4:192.0.2.10 -all"`,
		`bounces.elsewhere.test. TXT "v=spf1 ip4:192.0.2.10 -all"`,
	}, records...)})
}

// TestBulkRules_Authentication: SPF of the envelope domain, DKIM, DMARC
// published, and the From domain's alignment with the SPF domain and the
// DKIM d=, each in its passing and failing form.
func TestBulkRules_Authentication(t *testing.T) {
	srv := bulkZone(t)
	https := "https://mail.good.test"
	cases := []struct {
		name  string
		opts  dnscheck.Options
		wants []ruled
	}{
		{"all right", dnscheck.Options{Domain: "good.test", Selector: "s1", Bulk: &dnscheck.BulkRules{PublicURL: https}}, []ruled{
			{dnscheck.RuleSPF, dnscheck.OK, "good.test, the envelope sender's domain, publishes a usable SPF record"},
			{dnscheck.RuleDKIM, dnscheck.OK, "signed with d=good.test, selector s1"},
			{dnscheck.RuleDMARC, dnscheck.OK, "A DMARC record is published for good.test (at _dmarc.good.test, p=quarantine)"},
			{dnscheck.RuleAlignment, dnscheck.OK, "aligns with the SPF domain good.test (relaxed) and with the DKIM domain d=good.test (relaxed)"},
		}},
		{"bounce domain under the From domain", dnscheck.Options{Domain: "good.test", Selector: "s1", EnvelopeDomain: "bounces.good.test", Bulk: &dnscheck.BulkRules{}}, []ruled{
			{dnscheck.RuleSPF, dnscheck.OK, "bounces.good.test, the envelope sender's domain (--bounce-domain), publishes an SPF record"},
			{dnscheck.RuleAlignment, dnscheck.OK, "aligns with the SPF domain bounces.good.test (relaxed)"},
		}},
		{"bounce domain without SPF", dnscheck.Options{Domain: "good.test", Selector: "s1", EnvelopeDomain: "nospf.good.test", Bulk: &dnscheck.BulkRules{}}, []ruled{
			{dnscheck.RuleSPF, dnscheck.Error, "nospf.good.test, the envelope sender's domain (--bounce-domain), has no SPF record"},
		}},
		{"misaligned DKIM d=", dnscheck.Options{Domain: "good.test", Selector: "s1", Bulk: &dnscheck.BulkRules{DKIMDomain: "signer.elsewhere.test"}}, []ruled{
			{dnscheck.RuleAlignment, dnscheck.Warning, "aligns with the SPF domain good.test (relaxed) but not with the DKIM domain d=signer.elsewhere.test (relaxed)"},
		}},
		{"misaligned SPF domain", dnscheck.Options{Domain: "good.test", Selector: "s1", EnvelopeDomain: "bounces.elsewhere.test", Bulk: &dnscheck.BulkRules{}}, []ruled{
			{dnscheck.RuleSPF, dnscheck.OK, "bounces.elsewhere.test"},
			{dnscheck.RuleAlignment, dnscheck.Warning, "aligns with the DKIM domain d=good.test (relaxed) but not with the SPF domain bounces.elsewhere.test"},
		}},
		{"neither aligned", dnscheck.Options{Domain: "good.test", Selector: "s1", EnvelopeDomain: "bounces.elsewhere.test", Bulk: &dnscheck.BulkRules{DKIMDomain: "elsewhere.test"}}, []ruled{
			{dnscheck.RuleAlignment, dnscheck.Error, "aligns with neither the SPF domain bounces.elsewhere.test (relaxed) nor the DKIM domain d=elsewhere.test (relaxed)"},
		}},
		{"no DMARC record", dnscheck.Options{Domain: "nodmarc.test", Selector: "s1", Bulk: &dnscheck.BulkRules{}}, []ruled{
			{dnscheck.RuleDMARC, dnscheck.Error, "No DMARC record is published for nodmarc.test"},
			{dnscheck.RuleDKIM, dnscheck.OK, "signed with d=nodmarc.test"},
		}},
		{"DKIM key too weak", dnscheck.Options{Domain: "weakdkim.test", Selector: "s1", Bulk: &dnscheck.BulkRules{}}, []ruled{
			{dnscheck.RuleDKIM, dnscheck.Error, "DKIM signatures with selector s1 do not verify"},
		}},
		{"no selector", dnscheck.Options{Domain: "good.test", Bulk: &dnscheck.BulkRules{}}, []ruled{
			{dnscheck.RuleDKIM, dnscheck.Warning, "No DKIM selector was given"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Resolver = srv.Addr()
			expectRules(t, check(t, tc.opts), tc.wants...)
		})
	}
}

// TestBulkRules_StrictAlignment: aspf=s and adkim=s in the DMARC record
// make a subdomain no longer align.
func TestBulkRules_StrictAlignment(t *testing.T) {
	srv := bulkZone(t,
		"strict.test. MX 10 mx.strict.test.", "mx.strict.test. A 192.0.2.60",
		`strict.test. TXT "v=spf1 ip4:192.0.2.60 -all"`,
		`bounces.strict.test. TXT "v=spf1 ip4:192.0.2.60 -all"`,
		`_dmarc.strict.test. TXT "v=DMARC1; p=reject; aspf=s; adkim=s; rua=mailto:d@strict.test"`,
	)
	rep := check(t, dnscheck.Options{Domain: "strict.test", Resolver: srv.Addr(), EnvelopeDomain: "bounces.strict.test",
		Bulk: &dnscheck.BulkRules{DKIMDomain: "sub.strict.test"}})
	expectRules(t, rep, ruled{dnscheck.RuleAlignment, dnscheck.Error, "aligns with neither the SPF domain bounces.strict.test (strict) nor the DKIM domain d=sub.strict.test (strict)"})
}

// TestBulkRules_PTR: the rule restates the egress check per source — a
// forward-confirmed source is ok, one without a PTR record is an error
// with the egress check's fix — and says when there is no source to check.
func TestBulkRules_PTR(t *testing.T) {
	srv := bulkZone(t, "5.0.0.127.in-addr.arpa. PTR out1.good.test.", "out1.good.test. A 127.0.0.5")
	rep := check(t, dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: srv.Addr(), Bulk: &dnscheck.BulkRules{}, Egress: []dnscheck.Egress{
		{Name: "a", IP: netip.MustParseAddr("127.0.0.5"), EHLO: "out1.good.test"},
		{Name: "b", IP: netip.MustParseAddr("127.0.0.8"), EHLO: "out2.good.test"},
	}})
	expectRules(t, rep,
		ruled{dnscheck.RulePTR, dnscheck.OK, "Egress source a (127.0.0.5) has forward-confirmed reverse DNS"},
		ruled{dnscheck.RulePTR, dnscheck.Error, "Egress source b (127.0.0.8) lacks forward-confirmed reverse DNS"},
	)
	for _, f := range rep.Findings {
		if f.Rule == dnscheck.RulePTR && f.Level == dnscheck.Error && !strings.Contains(f.Fix, "PTR record for it naming this host, e.g. out2.good.test") {
			t.Errorf("the PTR rule's fix is not the egress check's: %q", f.Fix)
		}
	}

	rep = check(t, dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: srv.Addr(), Bulk: &dnscheck.BulkRules{}})
	expectRules(t, rep, ruled{dnscheck.RulePTR, dnscheck.OK, "No egress sources are configured"})
}

// TestBulkRules_OneClick: the unsubscribe links of bulk mail are ok only
// under an https --public-url at a name receivers can reach.
func TestBulkRules_OneClick(t *testing.T) {
	srv := bulkZone(t)
	cases := []struct {
		url   string
		level dnscheck.Level
		text  string
	}{
		{"https://mail.good.test", dnscheck.OK, "List-Unsubscribe: <https://mail.good.test/u/TOKEN>"},
		{"https://mail.good.test/base/", dnscheck.OK, "<https://mail.good.test/base/u/TOKEN>"},
		{"", dnscheck.Warning, "--public-url is not set"},
		{"http://mail.good.test", dnscheck.Warning, "the link is http, not https"},
		{"https://127.0.0.1:8787", dnscheck.Warning, "127.0.0.1 is a local name or address"},
		{"https://localhost", dnscheck.Warning, "localhost is a local name or address"},
		{"https://10.1.2.3", dnscheck.Warning, "10.1.2.3 is a local name or address"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			rep := check(t, dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: srv.Addr(), Bulk: &dnscheck.BulkRules{PublicURL: tc.url}})
			expectRules(t, rep, ruled{dnscheck.RuleOneClick, tc.level, tc.text})
		})
	}
}

// TestBulkRules_Off: without Options.Bulk the report has no bulk section.
func TestBulkRules_Off(t *testing.T) {
	rep := check(t, dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: bulkZone(t).Addr()})
	for _, f := range rep.Findings {
		if f.Check == dnscheck.CheckBulk {
			t.Errorf("bulk finding without Options.Bulk: %+v", f)
		}
	}
	if strings.Contains(rep.Text(), "BULK SENDER RULES") {
		t.Errorf("the text shows an empty bulk section:\n%s", rep.Text())
	}
}

func TestParseReceivers(t *testing.T) {
	got, err := dnscheck.ParseReceivers(dnscheck.DefaultReceivers)
	if err != nil || strings.Join(got, ",") != "gmail.com,yahoo.com,outlook.com" {
		t.Errorf("defaults: %v %v", got, err)
	}
	if got, err := dnscheck.ParseReceivers(" Gmail.COM., gmail.com ,, "); err != nil || strings.Join(got, ",") != "gmail.com" {
		t.Errorf("normalized and deduplicated: %v %v", got, err)
	}
	for _, s := range []string{"none", ""} {
		if got, err := dnscheck.ParseReceivers(s); err != nil || len(got) != 0 {
			t.Errorf("%q: %v %v", s, got, err)
		}
	}
	for _, s := range []string{"not a domain", "localhost", "a.test,b.test,c.test,d.test,e.test,f.test,g.test,h.test,i.test,j.test,k.test"} {
		if _, err := dnscheck.ParseReceivers(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}
