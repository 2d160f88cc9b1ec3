package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/cli"
	"github.com/sendonce/sendonce/internal/dkim"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

const cliSecret = "cli-test-secret-0123456789abcdef-xyz"

// zoneLine matches a record line printed by domains add.
var zoneLine = regexp.MustCompile(`(?m)^  (\S+)\. 3600 IN TXT (.+)$`)

// printedRecords returns the zone lines of domains add's output by name.
func printedRecords(t *testing.T, out string) map[string]string {
	t.Helper()
	recs := map[string]string{}
	for _, m := range zoneLine.FindAllStringSubmatch(out, -1) {
		recs[m[1]] = m[2]
	}
	if len(recs) != 3 {
		t.Fatalf("domains add printed %d records, want 3:\n%s", len(recs), out)
	}
	return recs
}

func TestDomainsAdd_PrintsRecordsAndSealsTheKey(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "sendonce.db")
	env := map[string]string{"SENDONCE_DB": db, "SENDONCE_SECRET_KEY": cliSecret}

	r := runCLI(t, env, "domains", "add", "Example.COM", "--selector", "mail", "--algorithm", "ed25519")
	if r.err != nil {
		t.Fatalf("domains add: %v\n%s", r.err, r.stderr)
	}
	recs := printedRecords(t, r.stdout)
	dkimRR := recs["mail._domainkey.example.com"]
	if !strings.HasPrefix(dkimRR, `"v=DKIM1; k=ed25519; p=`) || !strings.HasPrefix(recs["example.com"], `"v=spf1 `) ||
		!strings.HasPrefix(recs["_dmarc.example.com"], `"v=DMARC1; p=none`) {
		t.Errorf("records: %v", recs)
	}
	if !strings.Contains(r.stdout, "sendonce dns check example.com --selector mail") {
		t.Errorf("no hint to check the records:\n%s", r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("stderr with a secret set: %q", r.stderr)
	}

	// Stored sealed: it opens with the secret only, and it is the key
	// whose public half was printed.
	store := openDB(t, db)
	d, err := store.Domain(context.Background(), "default", "example.com")
	if err != nil {
		t.Fatal(err)
	}
	if !dkim.IsSealed(d.PrivateKey) {
		t.Fatal("the key is stored unsealed although SENDONCE_SECRET_KEY is set")
	}
	if _, err := dkim.Open(d.PrivateKey, ""); !errors.Is(err, dkim.ErrSecretRequired) {
		t.Errorf("open without the secret: %v", err)
	}
	key, err := dkim.Open(d.PrivateKey, cliSecret)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dkimRR, key.PublicKeyData()) {
		t.Errorf("the printed record is not the stored key's")
	}
	pem, err := key.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Join(strings.Split(string(pem), "\n")[1:2], "")
	for _, out := range []string{r.stdout, r.stderr} {
		if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, body) {
			t.Errorf("the private key is printed:\n%s", out)
		}
	}

	// One key per domain; list and remove.
	if r := runCLI(t, env, "domains", "add", "example.com", "--algorithm", "ed25519"); r.err == nil || !strings.Contains(r.err.Error(), "already exists") {
		t.Errorf("second add: %v", r.err)
	}
	r = runCLI(t, env, "domains", "list")
	if r.err != nil || !regexp.MustCompile(`(?m)^example\.com\s+mail\s+ed25519\s+encrypted\s`).MatchString(r.stdout) {
		t.Errorf("list: %v\n%s", r.err, r.stdout)
	}
	if r := runCLI(t, env, "domains", "remove", "example.com"); r.err != nil {
		t.Fatalf("remove: %v", r.err)
	}
	if r := runCLI(t, env, "domains", "remove", "example.com"); r.err == nil {
		t.Errorf("second remove succeeded")
	}
	if r := runCLI(t, env, "domains", "list"); r.err != nil || strings.Contains(r.stdout, "example.com") {
		t.Errorf("list after remove: %v\n%s", r.err, r.stdout)
	}
}

func TestDomainsAdd_WithoutSecretWarnsAndBadInputIsUsage(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "sendonce.db")
	r := runCLI(t, map[string]string{"SENDONCE_DB": db}, "domains", "add", "--algorithm", "ed25519", "plain.example")
	if r.err != nil || !strings.Contains(r.stderr, "unencrypted") {
		t.Fatalf("add without a secret: %v, stderr %q", r.err, r.stderr)
	}
	printedRecords(t, r.stdout)
	r = runCLI(t, map[string]string{"SENDONCE_DB": db, "SENDONCE_SECRET_KEY": "short"}, "domains", "add", "x.example")
	if !errors.Is(r.err, cli.ErrUsage) || strings.Contains(r.err.Error(), "short") {
		t.Errorf("short secret: %v", r.err)
	}
	for _, args := range [][]string{{"domains"}, {"domains", "add"}, {"domains", "rotate", "x.example"}, {"dns", "lookup", "x.example"}} {
		if r := runCLI(t, map[string]string{"SENDONCE_DB": db}, args...); !errors.Is(r.err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, r.err)
		}
	}
	if r := runCLI(t, map[string]string{"SENDONCE_DB": db}, "domains", "add", "not a domain"); r.err == nil || !strings.Contains(r.err.Error(), "not a domain name") {
		t.Errorf("bad name: %v", r.err)
	}
}

type jsonReport struct {
	Domain, Selector, Resolver string
	Findings                   []struct{ Check, Level, Message, Fix string }
}

func (r jsonReport) has(check, level, text string) bool {
	for _, f := range r.Findings {
		if f.Check == check && f.Level == level && strings.Contains(f.Message, text) {
			return true
		}
	}
	return false
}

// TestDNSCheck_JSONComparesWithTheStoredKey: dns check --json against a
// DNS server reports the stored selector and whether the published key is
// the stored one, and exits non-zero on errors.
func TestDNSCheck_JSONComparesWithTheStoredKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "sendonce.db")
	env := map[string]string{"SENDONCE_DB": db}
	r := runCLI(t, env, "domains", "add", "checked.test", "--selector", "k1", "--algorithm", "ed25519")
	if r.err != nil {
		t.Fatal(r.err)
	}
	published := printedRecords(t, r.stdout)["k1._domainkey.checked.test"]
	other, _ := dkim.GenerateKey(dkim.Ed25519)
	otherRec, _ := other.DNSRecord("k2", "checked.test")
	dns := dnstest.Start(t,
		"checked.test. MX 10 mx.checked.test.",
		"mx.checked.test. A 192.0.2.25",
		`checked.test. TXT "v=spf1 mx -all"`,
		"k1._domainkey.checked.test. TXT "+published,
		fmt.Sprintf("k2._domainkey.checked.test. TXT %q", otherRec.Value),
		`_dmarc.checked.test. TXT "v=DMARC1; p=reject; rua=mailto:dmarc-reports@checked.test"`,
	)

	check := func(t *testing.T, env map[string]string, args ...string) (jsonReport, error) {
		t.Helper()
		r := runCLI(t, env, append([]string{"dns", "check", "checked.test", "--json", "--resolver", dns.Addr()}, args...)...)
		var rep jsonReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("dns check --json printed no JSON (%v): %v\n%s", err, r.err, r.stdout)
		}
		if rep.Domain != "checked.test" || rep.Resolver != dns.Addr() {
			t.Errorf("report header %+v", rep)
		}
		return rep, r.err
	}

	rep, err := check(t, env)
	if err != nil || rep.Selector != "k1" || !rep.has("dkim", "ok", "the one sendonce signs") {
		t.Errorf("stored selector: %v %+v", err, rep)
	}
	// Another selector whose key is not ours: nothing to compare with.
	rep, err = check(t, env, "--selector", "k2")
	if err != nil || rep.Selector != "k2" || rep.has("dkim", "ok", "the one sendonce signs") {
		t.Errorf("selector k2: %v %+v", err, rep)
	}
	// The published key is not the stored one: an error, exit non-zero.
	dns2 := dnstest.Start(t, "checked.test. MX 10 mx.checked.test.", "mx.checked.test. A 192.0.2.25",
		fmt.Sprintf("k1._domainkey.checked.test. TXT %q", otherRec.Value))
	r = runCLI(t, env, "dns", "check", "--resolver", dns2.Addr(), "checked.test")
	if r.err == nil || !strings.Contains(r.stdout, "k1._domainkey.checked.test is not the one") || !strings.Contains(r.stdout, "Fix: ") {
		t.Errorf("mismatched key: %v\n%s", r.err, r.stdout)
	}

	// Without a database the check still runs, and creates no database.
	missing := filepath.Join(dir, "absent", "sendonce.db")
	rep, err = check(t, map[string]string{"SENDONCE_DB": "sqlite:" + missing}, "--selector", "k1")
	if err != nil || !rep.has("dkim", "ok", "Ed25519") || rep.has("dkim", "ok", "the one sendonce signs") {
		t.Errorf("without a database: %v %+v", err, rep)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dns check created the database: %v", err)
	}
}
