package dnscheck

import "testing"

// FuzzParseRecords reads arbitrary TXT texts as the domain check meets
// them in a zone (an SPF record is read when isSPF says it is one, as the
// check does): never a panic, and a DMARC record that cannot be used
// says why.
func FuzzParseRecords(f *testing.F) {
	for _, s := range []string{
		"v=spf1 ip4:192.0.2.0/24 include:_spf.example.net ~all", "v=spf1 redirect=a redirect=b", "v=spf1 a:x//33 mx/129 exp=",
		"v=spf1", "v=spf1 all -all +ip6:::1/129 ptr exists:%{i}", "v=DMARC1; p=reject; rua=mailto:a@b.test!10m; pct=50",
		"v=DMARC1", "p=none; v=DMARC1", "v=DMARC1;;=;p", "", " ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if isSPF(s) {
			parseSPF(s)
		}
		if rec, errs := parseDMARC(s); rec == nil && len(errs) == 0 {
			t.Fatalf("parseDMARC(%q): no record and no reason", s)
		}
	})
}
