package cli_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/cli"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

// TestDNSCheck_SenderRules: `dns check` prints the bulk sender rules
// section, judged with serve's settings from the same variables
// (SENDONCE_PUBLIC_URL, SENDONCE_BOUNCE_DOMAIN) or flags, with and
// without a database; a bad --tls-receivers is a usage error.
func TestDNSCheck_SenderRules(t *testing.T) {
	t.Parallel()
	dns := dnstest.Start(t,
		"rules.test. MX 10 mx.rules.test.", "mx.rules.test. A 192.0.2.25",
		`rules.test. TXT "v=spf1 mx -all"`,
		`_dmarc.rules.test. TXT "v=DMARC1; p=none; rua=mailto:d@rules.test"`,
	)
	dir := t.TempDir()
	withDB := map[string]string{"SENDONCE_DB": "sqlite:" + filepath.Join(dir, "sendonce.db")}
	if r := runCLI(t, withDB, "domains", "add", "rules.test"); r.err != nil {
		t.Fatal(r.err)
	}
	noDB := map[string]string{"SENDONCE_DB": "sqlite:" + filepath.Join(dir, "absent", "sendonce.db")}
	for name, env := range map[string]map[string]string{"database": withDB, "no database": noDB} {
		t.Run(name, func(t *testing.T) {
			r := runCLI(t, env, "dns", "check", "rules.test", "--selector", "s1", "--resolver", dns.Addr(), "--tls-receivers", "none")
			text := strings.Join(strings.Fields(r.stdout), " ") // unwrapped
			for _, want := range []string{
				"BULK SENDER RULES",
				"[dmarc] A DMARC record is published for rules.test",
				"[one-click] --public-url is not set",
				"[tls] No receiver domains are configured",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("no %q in:\n%s", want, r.stdout)
				}
			}

			env2 := map[string]string{"SENDONCE_PUBLIC_URL": "https://mail.rules.test", "SENDONCE_BOUNCE_DOMAIN": "bounces.elsewhere.test"}
			for k, v := range env {
				env2[k] = v
			}
			r = runCLI(t, env2, "dns", "check", "rules.test", "--selector", "s1", "--resolver", dns.Addr(), "--tls-receivers", "none")
			text = strings.Join(strings.Fields(r.stdout), " ")
			for _, want := range []string{
				"[one-click] Bulk mail carries List-Unsubscribe: <https://mail.rules.test/u/TOKEN>",
				"[spf] bounces.elsewhere.test, the envelope sender's domain (--bounce-domain), has no SPF record",
				"but not with the SPF domain bounces.elsewhere.test",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("no %q in:\n%s", want, r.stdout)
				}
			}
		})
	}

	r := runCLI(t, noDB, "dns", "check", "rules.test", "--resolver", dns.Addr(), "--tls-receivers", "not a domain")
	if !errors.Is(r.err, cli.ErrUsage) || !strings.Contains(r.err.Error(), "--tls-receivers") {
		t.Errorf("bad --tls-receivers: %v", r.err)
	}
}
