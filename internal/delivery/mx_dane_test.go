package delivery_test

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// spkiSHA256 is a DANE-EE(3) SPKI(1) SHA-256(1) record's data for cfg's
// certificate.
func spkiSHA256(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// TestMX_DANE: with --dane, TLSA records a validating resolver vouched for
// (the AD bit, set by the test's DNS server for the names it lists):
//   - a self-signed certificate (no CA, no matching name) whose key the
//     TLSA record names: delivered, "verified by DANE";
//   - a certificate the record does not name: deferred, never delivered;
//   - an exchanger without STARTTLS under a TLSA record: deferred, never in
//     plain text;
//   - the same mismatching record without the AD bit: DANE does not apply
//     and the message goes out over opportunistic TLS.
//
// Without --dane the mismatching domain is delivered too (the records are
// ignored), which shows the deferral is DANE's.
func TestMX_DANE(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		named, _ := smtptest.SelfSignedTLS(t)
		other, _ := smtptest.SelfSignedTLS(t)
		good := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.20:0", TLSConfig: named})
		port := good.Port
		wrong := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.21:" + port, TLSConfig: other})
		plain := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.22:" + port})
		tlsa := "TLSA 3 1 1 " + spkiSHA256(t, named)
		records := []string{
			"ee.test. MX 10 mx.ee.test.", "mx.ee.test. A 127.0.0.20", "_" + port + "._tcp.mx.ee.test. " + tlsa,
			"bad.test. MX 10 mx.bad.test.", "mx.bad.test. A 127.0.0.21", "_" + port + "._tcp.mx.bad.test. " + tlsa,
			"plain.test. MX 10 mx.plain.test.", "mx.plain.test. A 127.0.0.22", "_" + port + "._tcp.mx.plain.test. " + tlsa,
			"loose.test. MX 10 mx.loose.test.", "mx.loose.test. A 127.0.0.21", "_" + port + "._tcp.mx.loose.test. " + tlsa,
		}
		secure := []string{"ee.test", "_" + port + "._tcp.mx.ee.test", "bad.test", "_" + port + "._tcp.mx.bad.test",
			"plain.test", "_" + port + "._tcp.mx.plain.test"} // loose.test: none
		dns := dnstest.StartWithOptions(t, dnstest.Options{Records: records, Secure: secure})
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, MXPort: port, DNSResolver: dns.Addr(),
			DANE: true, RetryBase: 20 * time.Millisecond})

		ok := send(t, env, map[string]any{"to": "ann@ee.test", "subject": "dane", "text": "x"})
		bad := send(t, env, map[string]any{"to": "bob@bad.test", "subject": "dane", "text": "x"})
		bare := send(t, env, map[string]any{"to": "cy@plain.test", "subject": "dane", "text": "x"})
		loose := send(t, env, map[string]any{"to": "di@loose.test", "subject": "dane", "text": "x"})

		s := env.WaitStatus(t, ok, waitLong, core.StatusDelivered)
		if ev := eventDetails(s, core.EventSent); !strings.Contains(ev, "verified by DANE") {
			t.Errorf("sent event %q does not record the DANE verification", ev)
		}
		env.WaitStatus(t, loose, waitLong, core.StatusDelivered)
		waitEvent(t, env, bad, core.EventDeliveryDelayed, 2)
		waitEvent(t, env, bare, core.EventDeliveryDelayed, 2)
		time.Sleep(settle)
		for _, m := range wrong.Messages() {
			if strings.Join(m.To, ",") == "bob@bad.test" {
				t.Fatal("bob@bad.test was delivered to a certificate its TLSA record does not name")
			}
		}
		if n := len(plain.Messages()); n != 0 {
			t.Fatalf("the exchanger without STARTTLS got %d messages despite its TLSA record", n)
		}
		if le := str(getSend(t, env, bad), "last_error"); !strings.Contains(le, "TLSA") {
			t.Errorf("last_error %q does not say DANE refused the certificate", le)
		}

		t.Run("without --dane", func(t *testing.T) {
			env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, MXPort: port, DNSResolver: dns.Addr(),
				RetryBase: 20 * time.Millisecond})
			env.WaitStatus(t, send(t, env, map[string]any{"to": "eve@bad.test", "subject": "no dane", "text": "x"}), waitLong, core.StatusDelivered)
		})
	})
}
