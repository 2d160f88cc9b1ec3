package dnsresolve

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

func TestSystemAddr(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		path, want string
	}{
		{write("v4.conf", "# comment\nsearch example.test\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"), "192.0.2.53:53"},
		{write("v6.conf", "nameserver 2001:db8::53\n"), "[2001:db8::53]:53"},
	}
	for _, tt := range tests {
		got, err := SystemAddr(tt.path)
		if err != nil || got != tt.want {
			t.Errorf("SystemAddr(%s) = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
	for _, p := range []string{write("empty.conf", "options ndots:2\n"), filepath.Join(dir, "missing.conf")} {
		if got, err := SystemAddr(p); err == nil {
			t.Errorf("SystemAddr(%s) = %q, want an error", p, got)
		}
	}
}

func TestParseAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5353": "127.0.0.1:5353",
		"127.0.0.1":      "127.0.0.1:53",
		"[::1]":          "[::1]:53",
		"::1":            "[::1]:53",
		"[::1]:5353":     "[::1]:5353",
		"dns.example":    "dns.example:53",
	} {
		if got, err := ParseAddr(in); err != nil || got != want {
			t.Errorf("ParseAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "bad host", "a/b"} {
		if got, err := ParseAddr(in); err == nil {
			t.Errorf("ParseAddr(%q) = %q, want an error", in, got)
		}
	}
}

func TestParseAddr_Rejects(t *testing.T) {
	for _, in := range []string{"127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:dns", "user@host:53", ":53"} {
		if got, err := ParseAddr(in); err == nil {
			t.Errorf("ParseAddr(%q) = %q, want an error", in, got)
		}
	}
}

// TestLookup_FollowsCNAME: an alias the server resolves in its answer, and
// one it leaves for a second query, both end at the target's records.
func TestLookup_FollowsCNAME(t *testing.T) {
	srv := dnstest.Start(t,
		"alias.test. 60 IN CNAME mid.test.",
		"mid.test. 60 IN CNAME host.test.",
		"host.test. 60 IN A 192.0.2.7",
		"host.test. 60 IN TXT \"v=spf1\" \" -all\"",
	)
	ex := func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
		return Exchange(ctx, srv.Addr(), 2*time.Second, name, qtype)
	}
	a, err := Lookup(t.Context(), ex, "Alias.test", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Addrs(); len(got) != 1 || got[0] != netip.MustParseAddr("192.0.2.7") {
		t.Errorf("Addrs = %v; want [192.0.2.7]", got)
	}
	if want := []string{"mid.test", "host.test"}; !slices.Equal(a.Chain, want) {
		t.Errorf("Chain = %v; want %v", a.Chain, want)
	}
	txt, err := Lookup(t.Context(), ex, "alias.test.", dns.TypeTXT)
	if err != nil || !slices.Equal(txt.TXT(), []string{"v=spf1 -all"}) {
		t.Errorf("TXT = %v, %v; want [v=spf1 -all]", txt, err)
	}
	nx, err := Lookup(t.Context(), ex, "missing.test", dns.TypeA)
	if err != nil || !nx.NXDomain || len(nx.Records) != 0 {
		t.Errorf("missing.test = %+v, %v; want NXDOMAIN", nx, err)
	}
}

// TestLookup_SecureOnlyWhenEveryAnswerIsValidated: Secure follows the AD
// bit of every response on the way, CNAME hops included.
func TestLookup_SecureOnlyWhenEveryAnswerIsValidated(t *testing.T) {
	srv := dnstest.StartWithOptions(t, dnstest.Options{
		Records: []string{"a.test. TXT \"x\"", "b.test. TXT \"y\"", "alias.test. CNAME b.test.", "alias2.test. CNAME a.test."},
		Secure:  []string{"a.test", "alias2.test"}, NoCNAMEChase: true,
	})
	exchange := func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
		return Exchange(ctx, srv.Addr(), 2*time.Second, name, qtype)
	}
	for name, want := range map[string]bool{"a.test": true, "b.test": false, "alias.test": false, "alias2.test": true} {
		a, err := Lookup(context.Background(), exchange, name, dns.TypeTXT)
		if err != nil || len(a.Records) != 1 || a.Secure != want {
			t.Errorf("%s: %+v, %v; want one record, Secure %v", name, a, err, want)
		}
	}
}
