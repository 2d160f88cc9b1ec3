package inmail

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"net"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

// The receiving side's verdicts, each against a real DNS server and real
// DKIM signatures: SPF from the client's address, DKIM from the signatures,
// and DMARC from the From domain's policy and the alignment of what passed.
// Each case changes one input, so a verdict computed wrongly (a pass for a
// fail, an alignment ignored, a policy not found) fails its case.
func TestChecker_Verdicts(t *testing.T) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dkimRecord := `"v=DKIM1; k=ed25519; p=` + base64.StdEncoding.EncodeToString(pub) + `"`
	srv := dnstest.StartWithOptions(t, dnstest.Options{
		Records: []string{
			`example.test. TXT "v=spf1 ip4:127.0.0.10 -all"`,
			`_dmarc.example.test. TXT "v=DMARC1; p=reject"`,
			`sel._domainkey.example.test. TXT ` + dkimRecord,
			`sel._domainkey.mail.example.test. TXT ` + dkimRecord,
			`sel._domainkey.other.test. TXT ` + dkimRecord,
			`strict.test. TXT "v=spf1 ip4:127.0.0.10 -all"`,
			`_dmarc.strict.test. TXT "v=DMARC1; p=reject; adkim=s; aspf=s"`,
			`sel._domainkey.mail.strict.test. TXT ` + dkimRecord,
			`mail.strict.test. TXT "v=spf1 ip4:127.0.0.10 -all"`,
			`nopolicy.test. TXT "v=spf1 ip4:127.0.0.10 -all"`,
			`soft.test. TXT "v=spf1 ip4:127.0.0.10 ~all"`,
		},
		ServFail: []string{"_dmarc.broken.test"},
	})
	c := NewChecker("mx.receiver.test", srv.Addr())

	const inside, outside = "127.0.0.10", "127.0.0.20"
	cases := []struct {
		name       string
		ip         string
		mailFrom   string
		from       string
		signBy     string // DKIM d= ("" unsigned)
		tamper     bool   // change the body after signing
		spf, dkimV string
		dmarc      string
		failed     bool
	}{
		{"spf aligned passes dmarc", inside, "bounce@example.test", "boss@example.test", "", false, "pass", "none", "pass", false},
		{"spf from another address fails, nothing else passes", outside, "bounce@example.test", "boss@example.test", "", false, "fail", "none", "fail", true},
		{"dkim aligned passes dmarc where spf fails", outside, "bounce@example.test", "boss@example.test", "example.test", false, "fail", "pass", "pass", false},
		{"dkim of a subdomain aligns relaxed", outside, "bounce@example.test", "boss@example.test", "mail.example.test", false, "fail", "pass", "pass", false},
		{"dkim of another domain does not align", outside, "bounce@example.test", "boss@example.test", "other.test", false, "fail", "pass", "fail", true},
		{"a body changed after signing fails dkim", outside, "bounce@example.test", "boss@example.test", "example.test", true, "fail", "fail", "fail", true},
		{"spf of another domain does not align", inside, "bounce@nopolicy.test", "boss@example.test", "", false, "pass", "none", "fail", true},
		{"strict dkim alignment refuses a subdomain", outside, "bounce@strict.test", "boss@strict.test", "mail.strict.test", false, "fail", "pass", "fail", true},
		{"strict spf alignment refuses a subdomain", inside, "bounce@mail.strict.test", "boss@strict.test", "", false, "pass", "none", "fail", true},
		{"a subdomain without a policy takes its organization's", outside, "bounce@example.test", "boss@news.example.test", "", false, "fail", "none", "fail", true},
		{"no policy: none, not failed", outside, "bounce@nopolicy.test", "boss@nopolicy.test", "", false, "fail", "none", "none", false},
		{"softfail is not pass", outside, "bounce@soft.test", "boss@soft.test", "", false, "softfail", "none", "none", false},
		{"a policy lookup that fails is a temperror, never a rejection", inside, "bounce@broken.test", "boss@broken.test", "", false, "none", "none", "temperror", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte("From: " + tc.from + "\r\nTo: ada@receiver.test\r\nSubject: Verdicts\r\nMessage-ID: <v@example.test>\r\n\r\nPay the invoice today.\r\n")
			if tc.signBy != "" {
				var signed bytes.Buffer
				if err := dkim.Sign(&signed, bytes.NewReader(raw), &dkim.SignOptions{Domain: tc.signBy, Selector: "sel", Signer: key}); err != nil {
					t.Fatal(err)
				}
				raw = signed.Bytes()
			}
			if tc.tamper {
				raw = bytes.Replace(raw, []byte("today"), []byte("to me"), 1)
			}
			a := c.Check(context.Background(), net.ParseIP(tc.ip), "client.test", tc.mailFrom, tc.from, raw)
			if a.SPF != tc.spf || a.DKIM != tc.dkimV || a.DMARC != tc.dmarc || a.DMARCFailed != tc.failed {
				t.Fatalf("spf=%s dkim=%s dmarc=%s failed=%v, want spf=%s dkim=%s dmarc=%s failed=%v (%s)",
					a.SPF, a.DKIM, a.DMARC, a.DMARCFailed, tc.spf, tc.dkimV, tc.dmarc, tc.failed, a.Results)
			}
			checkResults(t, a)
		})
	}
}

// checkResults: the Authentication-Results header names this server and
// says each verdict as the fields do.
func checkResults(t *testing.T, a core.ReceivedAuth) {
	t.Helper()
	for _, want := range []string{"mx.receiver.test", "spf=" + a.SPF, "dmarc=" + a.DMARC} {
		if !strings.Contains(a.Results, want) {
			t.Errorf("Authentication-Results %q lacks %q", a.Results, want)
		}
	}
	if a.DKIM != "none" && !strings.Contains(a.Results, "dkim="+a.DKIM) {
		t.Errorf("Authentication-Results %q lacks dkim=%s", a.Results, a.DKIM)
	}
}
