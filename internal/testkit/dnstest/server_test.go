package dnstest_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

func query(t *testing.T, addr, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", dns.TypeToString[qtype], name, network, err)
	}
	return r
}

func TestServerAnswers(t *testing.T) {
	srv := dnstest.Start(t,
		"example.test. 300 IN MX 10 mx.example.test.",
		"mx.example.test. A 127.0.0.1",
		"Alias.Example.Test. CNAME mx.example.test.",
		"dangling.example.test. CNAME nowhere.test.",
		`deep.sub.example.test. TXT "hello" "world"`,
	)
	if host, _, _ := net.SplitHostPort(srv.Addr()); host != "127.0.0.1" {
		t.Errorf("Addr = %s", srv.Addr())
	}
	for _, network := range []string{"udp", "tcp"} {
		r := query(t, srv.Addr(), network, "example.test", dns.TypeMX)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !r.Authoritative || r.Answer[0].(*dns.MX).Mx != "mx.example.test." {
			t.Errorf("%s MX: %v", network, r)
		}
	}
	tests := []struct {
		name   string
		qtype  uint16
		rcode  int
		answer []string // record types in the answer section
	}{
		{"alias.example.test", dns.TypeA, dns.RcodeSuccess, []string{"CNAME", "A"}},
		{"ALIAS.example.test", dns.TypeCNAME, dns.RcodeSuccess, []string{"CNAME"}},
		{"dangling.example.test", dns.TypeA, dns.RcodeNameError, []string{"CNAME"}},
		{"mx.example.test", dns.TypeAAAA, dns.RcodeSuccess, nil},   // NODATA
		{"sub.example.test", dns.TypeTXT, dns.RcodeSuccess, nil},   // empty non-terminal
		{"other.example.test", dns.TypeA, dns.RcodeNameError, nil}, // NXDOMAIN
		{"deep.sub.example.test", dns.TypeANY, dns.RcodeSuccess, []string{"TXT"}},
	}
	for _, tt := range tests {
		r := query(t, srv.Addr(), "udp", tt.name, tt.qtype)
		var types []string
		for _, rr := range r.Answer {
			types = append(types, dns.TypeToString[rr.Header().Rrtype])
		}
		if r.Rcode != tt.rcode || strings.Join(types, ",") != strings.Join(tt.answer, ",") {
			t.Errorf("%s %s: rcode %s, answer %v; want %s, %v", dns.TypeToString[tt.qtype], tt.name, dns.RcodeToString[r.Rcode], types, dns.RcodeToString[tt.rcode], tt.answer)
		}
	}
	qs := srv.Queries()
	if len(qs) != 2+len(tests) || qs[0] != (dnstest.Query{Name: "example.test.", Type: "MX", Net: "udp"}) || qs[1].Net != "tcp" {
		t.Errorf("Queries = %+v", qs)
	}
}

func TestLookupTXT(t *testing.T) {
	long := strings.Repeat("a", 255)
	srv := dnstest.Start(t,
		`s1._domainkey.example.test. TXT "v=DKIM1; p=`+long+`" "`+long+`"`,
		"s2._domainkey.example.test. CNAME s1._domainkey.example.test.",
		"mx.example.test. A 127.0.0.1",
	)
	for _, name := range []string{"s1._domainkey.example.test", "s2._domainkey.example.test."} {
		txt, err := srv.LookupTXT(name)
		if err != nil || len(txt) != 1 || txt[0] != "v=DKIM1; p="+long+long {
			t.Errorf("LookupTXT(%s) = %q, %v", name, txt, err)
		}
	}
	for _, name := range []string{"mx.example.test", "none.example.test"} {
		var dnsErr *net.DNSError
		if _, err := srv.LookupTXT(name); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Errorf("LookupTXT(%s) = %v, want a not-found *net.DNSError", name, err)
		}
	}
}

func TestOptions(t *testing.T) {
	srv := dnstest.StartWithOptions(t, dnstest.Options{
		Records:      []string{"a.example.test. CNAME b.example.test.", "b.example.test. A 127.0.0.1"},
		TruncateUDP:  true,
		NoCNAMEChase: true,
		ServFail:     []string{"broken.example.test"},
	})
	r := query(t, srv.Addr(), "udp", "a.example.test", dns.TypeA)
	if !r.Truncated || len(r.Answer) != 0 {
		t.Errorf("UDP answer not truncated: %v", r)
	}
	r = query(t, srv.Addr(), "tcp", "a.example.test", dns.TypeA)
	if r.Truncated || len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeCNAME {
		t.Errorf("TCP answer with NoCNAMEChase: %v", r)
	}
	r = query(t, srv.Addr(), "tcp", "BROKEN.example.test", dns.TypeTXT)
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("ServFail name answered %s", dns.RcodeToString[r.Rcode])
	}
	// LookupTXT retries over TCP on truncation.
	if _, err := srv.LookupTXT("b.example.test"); err == nil || !strings.Contains(err.Error(), "no TXT") {
		t.Errorf("LookupTXT over truncating UDP = %v", err)
	}
}

func TestZoneFile(t *testing.T) {
	srv := dnstest.StartWithOptions(t, dnstest.Options{ZoneFile: "testdata/example.zone", Records: []string{"extra.example.test. A 127.0.0.2"}})
	r := query(t, srv.Addr(), "udp", "www.example.test", dns.TypeA)
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.80" {
		t.Errorf("zone file record: %v", r)
	}
	if r := query(t, srv.Addr(), "udp", "extra.example.test", dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("Records beside the zone file: %v", r)
	}
}

func TestLargeAnswerTruncatedToEDNSSize(t *testing.T) {
	var recs []string
	for range 40 {
		recs = append(recs, `big.example.test. TXT "`+strings.Repeat("x", 200)+`"`)
	}
	// Identical records are kept: the test server does not deduplicate.
	srv := dnstest.Start(t, recs...)
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion("big.example.test.", dns.TypeTXT)
	r, _, err := c.Exchange(m, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated {
		t.Errorf("an 8 kB answer to a query without EDNS0 was not truncated")
	}
	if r := query(t, srv.Addr(), "tcp", "big.example.test", dns.TypeTXT); r.Truncated || len(r.Answer) != 40 {
		t.Errorf("TCP answer: truncated=%t, %d records", r.Truncated, len(r.Answer))
	}
}
