package dnscheck_test

import (
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestBulkRules_TLS: the receivers are test domains whose MX records
// point at local go-smtp servers on one port: one offers STARTTLS with a
// certificate the test CA issued for its name (ok), one offers no
// STARTTLS (error), one a certificate for another name (error); a
// receiver without MX, and one whose exchanger the outbound policy does
// not allow, cannot be judged (warnings). Every connection ends with
// QUIT and no mail is sent.
func TestBulkRules_TLS(t *testing.T) {
	ca := smtptest.NewCA(t)
	good := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.2:0", TLSConfig: ca.Server(t, "mx.rx-tls.test")})
	plain := smtptest.Start(t, smtptest.Options{Addr: net.JoinHostPort("127.0.0.3", good.Port)})
	wrong := smtptest.Start(t, smtptest.Options{Addr: net.JoinHostPort("127.0.0.4", good.Port), TLSConfig: ca.Server(t, "other.example")})
	srv := bulkZone(t,
		"rx-tls.test. MX 10 mx.rx-tls.test.", "rx-tls.test. MX 20 backup.rx-tls.test.", "mx.rx-tls.test. A 127.0.0.2",
		"rx-plain.test. MX 10 mx.rx-plain.test.", "mx.rx-plain.test. A 127.0.0.3",
		"rx-wrong.test. MX 10 mx.rx-wrong.test.", "mx.rx-wrong.test. A 127.0.0.4",
		"rx-nomx.test. A 127.0.0.2",
		"rx-blocked.test. MX 10 mx.rx-blocked.test.", "mx.rx-blocked.test. A 127.0.0.9",
	)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	receivers, err := dnscheck.ParseReceivers("rx-tls.test,rx-plain.test,rx-wrong.test,rx-nomx.test,rx-blocked.test")
	if err != nil {
		t.Fatal(err)
	}
	rep := check(t, dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: srv.Addr(), Bulk: &dnscheck.BulkRules{
		Receivers: receivers, Port: good.Port, RootCAs: roots, HELOName: "out.good.test",
		Policy: netpolicy.MustParse("127.0.0.2,127.0.0.3,127.0.0.4"), ProbeTimeout: 5 * time.Second,
	}})
	expectRules(t, rep,
		ruled{dnscheck.RuleTLS, dnscheck.OK, "rx-tls.test's exchanger mx.rx-tls.test (127.0.0.2) offers STARTTLS (TLS 1.3) with a certificate valid for its name"},
		ruled{dnscheck.RuleTLS, dnscheck.Error, "rx-plain.test's exchanger mx.rx-plain.test (127.0.0.3) did not offer STARTTLS"},
		ruled{dnscheck.RuleTLS, dnscheck.Error, "rx-wrong.test's exchanger mx.rx-wrong.test (127.0.0.4) offered STARTTLS with a certificate that is not valid for mx.rx-wrong.test (it names other hosts)"},
		ruled{dnscheck.RuleTLS, dnscheck.Warning, "TLS to rx-nomx.test was not checked: it has no MX record here"},
		ruled{dnscheck.RuleTLS, dnscheck.Warning, "TLS to rx-blocked.test was not checked: the outbound policy does not allow connecting to 127.0.0.9"},
	)
	for _, s := range []*smtptest.Server{good, plain, wrong} {
		if n := s.Connections(); n != 1 || len(s.Messages()) != 0 {
			t.Errorf("server %s: %d connections, %d messages; want one connection and no mail", s.Addr, n, len(s.Messages()))
		}
	}

	// The system's roots do not know the test CA: the good exchanger's
	// certificate is then not valid either.
	rep = check(t, dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: srv.Addr(), Bulk: &dnscheck.BulkRules{
		Receivers: []string{"rx-tls.test"}, Port: good.Port, Policy: netpolicy.MustParse("127.0.0.2"),
	}})
	expectRules(t, rep, ruled{dnscheck.RuleTLS, dnscheck.Error, "signed by an unknown authority"})
}

// TestBulkRules_TLSUnreachable: an exchanger nothing listens at is a
// warning (the check could not judge: port 25 is often blocked), not an
// error, and costs no more than the probe's timeout.
func TestBulkRules_TLSUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.5:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close() // nothing listens there now: connection refused
	srv := bulkZone(t, "rx-down.test. MX 10 mx.rx-down.test.", "mx.rx-down.test. A 127.0.0.5")
	start := time.Now()
	rep := check(t, dnscheck.Options{Domain: "good.test", Selector: "s1", Resolver: srv.Addr(), Bulk: &dnscheck.BulkRules{
		Receivers: []string{"rx-down.test"}, Port: port, Policy: netpolicy.MustParse("127.0.0.5"), ProbeTimeout: 2 * time.Second,
	}})
	expectRules(t, rep, ruled{dnscheck.RuleTLS, dnscheck.Warning, "TLS to rx-down.test was not checked: connecting to rx-down.test's exchanger mx.rx-down.test (127.0.0.5) failed (connection refused)"})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the check took %v", d)
	}
	if strings.Contains(rep.Text(), "127.0.0.5:"+port) {
		t.Errorf("the report shows the dialled address and port:\n%s", rep.Text())
	}
}
