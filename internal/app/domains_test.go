package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/server"
)

func TestNormalizeDomain(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"example.com":           "example.com",
		"Mail.Example.COM.":     "mail.example.com",
		" example.com ":         "example.com",
		"Bücher.example":        "xn--bcher-kva.example",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
		"a-1.b2.example":        "a-1.b2.example",
		"example.123a":          "example.123a",
	} {
		if got, err := app.NormalizeDomain(in); err != nil || got != want {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", ".", "localhost", "com.", "192.0.2.1", "exa mple.com", "-a.example", "a-.example", "a..example",
		"_dmarc.example.com", "user@example.com", "example.com/x", "http://example.com", "*.example.com",
		strings.Repeat("a", 64) + ".example", strings.Repeat(strings.Repeat("a", 60)+".", 5) + "example",
		"exa\nmple.com", "example.com\x00",
	} {
		if got, err := app.NormalizeDomain(in); err == nil || core.ErrorCode(err) != core.CodeValidation {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want a validation error", in, got, err)
		}
	}
}

func TestResolverAddrAndSecretKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "", "127.0.0.1:5353": "127.0.0.1:5353", "192.0.2.53": "192.0.2.53:53", "[2001:db8::1]": "[2001:db8::1]:53", "ns.example:53": "ns.example:53"} {
		if got, err := app.ResolverAddr(in); err != nil || got != want {
			t.Errorf("ResolverAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"a b:53", ":53", "host:", "http://x/y"} {
		if got, err := app.ResolverAddr(in); err == nil {
			t.Errorf("ResolverAddr(%q) = %q, want an error", in, got)
		}
	}
	if err := app.CheckSecretKey(""); err != nil {
		t.Errorf("no secret: %v", err)
	}
	if err := app.CheckSecretKey(strings.Repeat("x", 32)); err != nil {
		t.Errorf("32 bytes: %v", err)
	}
	if err := app.CheckSecretKey("too-short-secret"); err == nil || strings.Contains(err.Error(), "too-short-secret") {
		t.Errorf("short secret: %v (the error must not quote it)", err)
	}
}

// TestAddDomain_KeyGeneratedOutsideTheTransaction: generating an RSA-2048
// key takes tens to hundreds of milliseconds, and inside a transaction it
// held SQLite's one writer, stalling every tenant's writes. PrepareDomain
// generates it with no database at all (the service here has none); the
// transaction stores that key as it is. (It once compared the two
// durations, which a loaded CI machine turned red at random: what the
// transaction stores is the fact, not how long it took.)
func TestAddDomain_KeyGeneratedOutsideTheTransaction(t *testing.T) {
	ctx := context.Background()
	d, err := app.New(nil, app.Config{}, nil).PrepareDomain(app.AddDomainParams{Domain: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Algorithm != "rsa2048" || len(d.PrivateKey) == 0 || !strings.HasPrefix(d.PublicRecord, "v=DKIM1") {
		t.Fatalf("prepared domain %+v", d)
	}

	srv := sqliteServer(t, server.Config{Transport: "capture"})
	err = srv.Store.InTx(ctx, func(tx core.Tx) error { return srv.Service.AddDomain(ctx, tx, d) })
	if err != nil {
		t.Fatal(err)
	}
	if got, err := srv.Service.Domain(ctx, "default", "example.com"); err != nil || got.PublicRecord != d.PublicRecord {
		t.Fatalf("stored domain %+v, %v", got, err)
	}
}

// TestVerifyStatus: the DKIM findings alone decide a domain's status.
func TestVerifyStatus(t *testing.T) {
	t.Parallel()
	f := func(check string, l dnscheck.Level) dnscheck.Finding { return dnscheck.Finding{Check: check, Level: l} }
	for _, c := range []struct {
		name     string
		findings []dnscheck.Finding
		want     core.DomainStatus
	}{
		{"dkim ok, others failing", []dnscheck.Finding{f(dnscheck.CheckMX, dnscheck.Error), f(dnscheck.CheckDKIM, dnscheck.OK), f(dnscheck.CheckSPF, dnscheck.Error)}, core.DomainVerified},
		{"dkim ok with a warning", []dnscheck.Finding{f(dnscheck.CheckDKIM, dnscheck.OK), f(dnscheck.CheckDKIM, dnscheck.Warning)}, core.DomainVerified},
		{"dkim error", []dnscheck.Finding{f(dnscheck.CheckDKIM, dnscheck.OK), f(dnscheck.CheckDKIM, dnscheck.Error)}, core.DomainFailed},
		{"no dkim finding", []dnscheck.Finding{f(dnscheck.CheckMX, dnscheck.OK)}, core.DomainFailed},
		{"dkim warning only", []dnscheck.Finding{f(dnscheck.CheckDKIM, dnscheck.Warning)}, core.DomainFailed},
	} {
		if got := app.VerifyStatus(&dnscheck.Report{Findings: c.findings}); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
