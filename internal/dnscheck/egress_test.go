package dnscheck_test

import (
	"net/netip"
	"testing"

	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

// TestCheckEgress: forward-confirmed reverse DNS of each egress source
// from a real DNS server — confirmed and named in EHLO (ok), confirmed
// under another name than the EHLO (warning), a PTR whose name does not
// resolve back (error), no PTR at all (error).
func TestCheckEgress(t *testing.T) {
	srv := dnstest.StartWithOptions(t, dnstest.Options{ZoneFile: "testdata/fixtures.zone", Records: []string{
		"5.0.0.127.in-addr.arpa. PTR out1.example.test.", "out1.example.test. A 127.0.0.5",
		"6.0.0.127.in-addr.arpa. PTR out2.example.test.", "out2.example.test. A 127.0.0.6",
		"7.0.0.127.in-addr.arpa. PTR elsewhere.example.test.", "elsewhere.example.test. A 192.0.2.7",
	}})
	rep := check(t, dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: srv.Addr(), Egress: []dnscheck.Egress{
		{Name: "a", IP: netip.MustParseAddr("127.0.0.5"), EHLO: "out1.example.test"},
		{Name: "b", IP: netip.MustParseAddr("127.0.0.6"), EHLO: "localhost"},
		{Name: "c", IP: netip.MustParseAddr("127.0.0.7"), EHLO: "elsewhere.example.test"},
		{Name: "d", IP: netip.MustParseAddr("127.0.0.8"), EHLO: "out4.example.test"},
	}})
	expectHas(t, rep,
		want{dnscheck.CheckEgress, dnscheck.OK, "Egress source a (127.0.0.5): reverse DNS out1.example.test is forward-confirmed"},
		want{dnscheck.CheckEgress, dnscheck.Warning, "Egress source b (127.0.0.6) says EHLO localhost"},
		want{dnscheck.CheckEgress, dnscheck.Error, "does not resolve back to 127.0.0.7"},
		want{dnscheck.CheckEgress, dnscheck.Error, "Egress source d (127.0.0.8) has no PTR record"},
	)
	checkFixes(t, rep)
}
