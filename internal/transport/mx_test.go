package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
	"github.com/sendonce/sendonce/internal/transport"
)

var (
	mxErr451 = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "greylisted, try later"}
	mxErr550 = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
)

// mxConfig queries dnsSrv and has timeouts short enough that a hang fails
// the test quickly.
func mxConfig(dnsSrv *dnstest.Server) transport.MXConfig {
	return transport.MXConfig{
		Resolver:       dnsSrv.Addr(),
		DNSTimeout:     2 * time.Second,
		DialTimeout:    2 * time.Second,
		CommandTimeout: 5 * time.Second,
		DataTimeout:    5 * time.Second,
		// Fixture addresses come from the documentation ranges, which the
		// default policy refuses like any address that is not global.
		Policy: netpolicy.MustParse("192.0.2.0/24,198.51.100.0/24,2001:db8::/32"),
	}
}

// loopbackOK is mxConfig's policy plus loopback, where the test servers
// listen.
var loopbackOK = netpolicy.MustParse("192.0.2.0/24,198.51.100.0/24,2001:db8::/32,127.0.0.0/8,::1/128")

// mxMessage is a message with a Message-ID, CRLF line endings and a line
// that needs dot-stuffing.
func mxMessage(id string) []byte {
	return []byte("From: Sender <sender@sendonce.test>\r\nSubject: hello\r\nMessage-ID: <" + id + ">\r\n\r\nHi,\r\n.dot\r\nbye\r\n")
}

// mxDeliverErr runs Deliver, which must fail, and returns the error.
func mxDeliverErr(t *testing.T, ctx context.Context, cfg transport.MXConfig, to []string, id string) *transport.Error {
	t.Helper()
	err := transport.NewMX(cfg).Deliver(ctx, transport.Envelope{From: "sender@sendonce.test", To: to}, mxMessage(id))
	var te *transport.Error
	if !errors.As(err, &te) {
		t.Fatalf("Deliver = %v, want a *transport.Error", err)
	}
	return te
}

func mxCheckErr(t *testing.T, te *transport.Error, class transport.Class, stage string, code int) {
	t.Helper()
	if te.Class != class || te.Stage != stage || te.Code != code {
		t.Errorf("got class=%v stage=%q code=%d, want class=%v stage=%q code=%d (%v)", te.Class, te.Stage, te.Code, class, stage, code, te)
	}
}

// routes is a DialContext that sends connections for fixture addresses
// (from the documentation ranges, so nothing real is ever dialled) to test
// servers on 127.0.0.1, refuses the others, and records the order.
type routes struct {
	mu    sync.Mutex
	to    map[string]string // fixture IP → 127.0.0.1:port
	dials []string
}

func newRoutes(to map[string]*smtptest.Server) *routes {
	r := &routes{to: map[string]string{}}
	for ip, srv := range to {
		r.to[ip] = srv.Addr
	}
	return r
}

func (r *routes) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.dials = append(r.dials, host)
	target, ok := r.to[host]
	r.mu.Unlock()
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused (no test route)")}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, target)
}

func (r *routes) dialled() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.dials)
}

func TestMXDeliver(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	dnsSrv := dnstest.Start(t, "example.test. MX 10 mx.example.test.", "mx.example.test. A 127.0.0.1")
	cfg := mxConfig(dnsSrv)
	cfg.Port, cfg.Policy = srv.Port, loopbackOK
	env := transport.Envelope{From: "sender@sendonce.test", To: []string{"alice@example.test", "bob@EXAMPLE.TEST."}}
	if err := transport.NewMX(cfg).Deliver(context.Background(), env, mxMessage("mx-1@sendonce.test")); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	m := oneMessage(t, srv)
	if m.From != env.From || !slices.Equal(m.To, env.To) || m.TLS {
		t.Fatalf("message = %+v", m)
	}
	if !strings.Contains(string(m.Data), "\r\n.dot\r\n") {
		t.Errorf("body altered: %q", m.Data)
	}
	var types []string
	for _, q := range dnsSrv.Queries() {
		types = append(types, q.Type+" "+q.Name)
	}
	if want := []string{"MX example.test.", "A mx.example.test.", "AAAA mx.example.test."}; !slices.Equal(types, want) {
		t.Errorf("DNS queries = %v, want %v (one MX lookup for both recipients)", types, want)
	}
}

func TestMXDeliverStartTLS(t *testing.T) {
	serverTLS, clientTLS := smtptest.SelfSignedTLS(t)
	srv := smtptest.Start(t, smtptest.Options{TLSConfig: serverTLS})
	dnsSrv := dnstest.Start(t,
		"self.test. MX 10 mx.self.test.", "mx.self.test. A 127.0.0.1",
		"verified.test. MX 10 localhost.", "localhost. A 127.0.0.1",
	)
	cfg := mxConfig(dnsSrv)
	cfg.Port, cfg.Policy = srv.Port, loopbackOK

	// Opportunistic: STARTTLS offered, so used, certificate not verified.
	if err := transport.NewMX(cfg).Deliver(context.Background(), transport.Envelope{From: "s@sendonce.test", To: []string{"a@self.test"}}, mxMessage("tls-1@sendonce.test")); err != nil {
		t.Fatalf("opportunistic STARTTLS: %v", err)
	}
	// Verified against the MX name: the self-signed certificate is not
	// trusted, so the only exchanger fails temporarily.
	cfg.VerifyTLS = true
	te := mxDeliverErr(t, context.Background(), cfg, []string{"a@self.test"}, "tls-2@sendonce.test")
	mxCheckErr(t, te, transport.Temporary, transport.StageTLS, 0)
	// Trusted, and the MX name (localhost) is in the certificate.
	cfg.TLSConfig = clientTLS
	if err := transport.NewMX(cfg).Deliver(context.Background(), transport.Envelope{From: "s@sendonce.test", To: []string{"a@verified.test"}}, mxMessage("tls-3@sendonce.test")); err != nil {
		t.Fatalf("verified STARTTLS: %v", err)
	}
	// The name is checked: mx.self.test is not in the certificate.
	te = mxDeliverErr(t, context.Background(), cfg, []string{"a@self.test"}, "tls-4@sendonce.test")
	mxCheckErr(t, te, transport.Temporary, transport.StageTLS, 0)

	msgs := srv.Messages()
	if len(msgs) != 2 || !msgs[0].TLS || !msgs[1].TLS || msgs[0].MessageID != "tls-1@sendonce.test" || msgs[1].MessageID != "tls-3@sendonce.test" {
		t.Errorf("messages = %+v", msgs)
	}
}

// preferenceZone has three exchangers listed out of order.
var preferenceZone = []string{
	"pref.test. MX 30 c.pref.test.",
	"pref.test. MX 10 a.pref.test.",
	"pref.test. MX 20 b.pref.test.",
	"a.pref.test. A 192.0.2.1",
	"b.pref.test. A 192.0.2.2",
	"c.pref.test. A 192.0.2.3",
}

func TestMXDeliverPreferenceOrder(t *testing.T) {
	tests := []struct {
		name  string
		first smtptest.Behaviour // the preferred exchanger's behaviour
		route bool               // whether the preferred exchanger accepts connections
	}{
		{"refused connection", smtptest.Behaviour{}, false},
		{"4xx at MAIL", smtptest.Behaviour{MailErr: mxErr451}, true},
		{"4xx at RCPT", smtptest.Behaviour{RcptErr: mxErr451}, true},
		{"hang-up before DATA", smtptest.Behaviour{HangUpBeforeData: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b, c := smtptest.Start(t, smtptest.Options{}), smtptest.Start(t, smtptest.Options{}), smtptest.Start(t, smtptest.Options{})
			a.SetBehaviour(tt.first)
			r := newRoutes(map[string]*smtptest.Server{"192.0.2.2": b, "192.0.2.3": c})
			if tt.route {
				r.to["192.0.2.1"] = a.Addr
			}
			cfg := mxConfig(dnstest.Start(t, preferenceZone...))
			cfg.DialContext = r.dial
			err := transport.NewMX(cfg).Deliver(context.Background(), transport.Envelope{From: "s@sendonce.test", To: []string{"u@pref.test"}}, mxMessage("pref@sendonce.test"))
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			if got := r.dialled(); !slices.Equal(got, []string{"192.0.2.1", "192.0.2.2"}) {
				t.Errorf("dialled %v, want the preference-10 then the preference-20 exchanger", got)
			}
			if len(a.Messages()) != 0 || len(b.Messages()) != 1 || c.Connections() != 0 {
				t.Errorf("messages a=%d b=%d, connections c=%d", len(a.Messages()), len(b.Messages()), c.Connections())
			}
		})
	}
}

// greeter is an SMTP server that greets with line and hangs up after QUIT.
func greeter(t *testing.T, line string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(conn, "%s\r\n", line)
			buf := make([]byte, 512)
			conn.Read(buf) // QUIT, or nothing
			conn.Close()
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func TestMXDeliver5xxGreetingTriesNext(t *testing.T) {
	b := smtptest.Start(t, smtptest.Options{})
	r := newRoutes(map[string]*smtptest.Server{"192.0.2.2": b})
	r.to["192.0.2.1"] = greeter(t, "554 5.7.1 no service for you")
	cfg := mxConfig(dnstest.Start(t, preferenceZone...))
	cfg.DialContext = r.dial
	if err := transport.NewMX(cfg).Deliver(context.Background(), transport.Envelope{From: "s@sendonce.test", To: []string{"u@pref.test"}}, mxMessage("g@sendonce.test")); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if len(b.Messages()) != 1 {
		t.Errorf("the next exchanger got %d messages", len(b.Messages()))
	}

	// When every exchanger refuses service, the message is deferred, as
	// Postfix does by default (smtp_skip_5xx_greeting): a greeting says
	// nothing of the message, and the queue lifetime ends it if it lasts.
	r = &routes{to: map[string]string{"192.0.2.1": r.to["192.0.2.1"], "192.0.2.2": r.to["192.0.2.1"], "192.0.2.3": r.to["192.0.2.1"]}}
	cfg.DialContext = r.dial
	te := mxDeliverErr(t, context.Background(), cfg, []string{"u@pref.test"}, "g2@sendonce.test")
	mxCheckErr(t, te, transport.Temporary, transport.StageGreeting, 554)
	if !te.Reached || !strings.Contains(te.Error(), "all 3 mail exchanger addresses") {
		t.Errorf("error = %v", te)
	}
}

func TestMXDeliverStopsAtFirstHost(t *testing.T) {
	tests := []refusal{
		{"5xx at RCPT", smtptest.Behaviour{RcptErr: mxErr550}, transport.Permanent, transport.StageRcpt, 550},
		{"5xx at MAIL", smtptest.Behaviour{MailErr: mxErr550}, transport.Permanent, transport.StageMail, 550},
		{"4xx after DATA", smtptest.Behaviour{DataErr: mxErr451}, transport.Temporary, transport.StageDataEnd, 451},
		{"5xx after DATA", smtptest.Behaviour{DataErr: mxErr550}, transport.Permanent, transport.StageDataEnd, 550},
		{"hang-up after DATA", smtptest.Behaviour{HangUpAfterData: true}, transport.Ambiguous, transport.StageDataEnd, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := smtptest.Start(t, smtptest.Options{}), smtptest.Start(t, smtptest.Options{})
			a.SetBehaviour(tt.b)
			r := newRoutes(map[string]*smtptest.Server{"192.0.2.1": a, "192.0.2.2": b})
			cfg := mxConfig(dnstest.Start(t, preferenceZone...))
			cfg.DialContext = r.dial
			te := mxDeliverErr(t, context.Background(), cfg, []string{"u@pref.test"}, "stop@sendonce.test")
			mxCheckErr(t, te, tt.class, tt.stage, tt.code)
			if !te.Reached {
				t.Errorf("Reached = false")
			}
			if b.Connections() != 0 {
				t.Errorf("the next exchanger was tried (%d connections)", b.Connections())
			}
			if !strings.Contains(te.Error(), "a.pref.test [192.0.2.1]") {
				t.Errorf("error does not name the exchanger: %v", te)
			}
		})
	}
}

func TestMXDeliverAllTemporary(t *testing.T) {
	a := smtptest.Start(t, smtptest.Options{})
	a.SetBehaviour(smtptest.Behaviour{RcptErr: mxErr451})
	// b refuses connections; c greylists.
	c := smtptest.Start(t, smtptest.Options{})
	c.SetBehaviour(smtptest.Behaviour{RcptErr: mxErr451})
	r := newRoutes(map[string]*smtptest.Server{"192.0.2.1": a, "192.0.2.3": c})
	cfg := mxConfig(dnstest.Start(t, preferenceZone...))
	cfg.DialContext = r.dial
	te := mxDeliverErr(t, context.Background(), cfg, []string{"u@pref.test"}, "tmp@sendonce.test")
	mxCheckErr(t, te, transport.Temporary, transport.StageRcpt, 451)
	if !te.Reached || !strings.Contains(te.Error(), "c.pref.test [192.0.2.3]") {
		t.Errorf("error = %v, want the last reached exchanger's 451", te)
	}
	if got := r.dialled(); len(got) != 3 {
		t.Errorf("dialled %v", got)
	}
}

func TestMXDeliverMaxAddresses(t *testing.T) {
	zone := []string{}
	for i := range 8 {
		zone = append(zone, fmt.Sprintf("many.test. MX %d mx%d.many.test.", i, i), fmt.Sprintf("mx%d.many.test. A 192.0.2.%d", i, 10+i))
	}
	r := newRoutes(nil)
	cfg := mxConfig(dnstest.Start(t, zone...))
	cfg.DialContext, cfg.MaxAddresses = r.dial, 3
	te := mxDeliverErr(t, context.Background(), cfg, []string{"u@many.test"}, "max@sendonce.test")
	mxCheckErr(t, te, transport.Temporary, transport.StageDial, 0)
	if got := r.dialled(); !slices.Equal(got, []string{"192.0.2.10", "192.0.2.11", "192.0.2.12"}) {
		t.Errorf("dialled %v, want the 3 most preferred", got)
	}
}

func TestMXDeliverResolution(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	dnsSrv := dnstest.StartWithOptions(t, dnstest.Options{
		Records: []string{
			"implicit.test. A 127.0.0.1", // no MX: the domain is its own exchanger
			"null.test. MX 0 .",
			"noaddr.test. MX 10 gone.noaddr.test.",
			"nomail.test. TXT \"no mail here\"",
			"alias.test. MX 10 mail.alias.test.",
			"mail.alias.test. CNAME real.alias.test.",
			"real.alias.test. A 127.0.0.1",
			"servfail.test. MX 10 broken.servfail.test.",
			"loop.test. MX 10 mx.loop.test.",
			"mx.loop.test. A 127.0.0.1",
			"xn--bcher-kva.test. MX 10 mx.xn--bcher-kva.test.",
			"mx.xn--bcher-kva.test. AAAA ::1",
			"mx.xn--bcher-kva.test. A 127.0.0.1",
		},
		ServFail:     []string{"broken.servfail.test", "down.test"},
		NoCNAMEChase: true,
	})
	tests := []struct {
		rcpt     string
		loopback bool
		class    transport.Class // 0: delivered
		stage    string
	}{
		{"u@implicit.test", true, 0, ""},
		{"u@alias.test", true, 0, ""},
		{"jürgen@bücher.test", true, 0, ""},
		{"u@null.test", true, transport.Permanent, transport.StageResolve},
		{"u@missing.test", true, transport.Permanent, transport.StageResolve},
		{"u@noaddr.test", true, transport.Permanent, transport.StageResolve},
		{"u@nomail.test", true, transport.Permanent, transport.StageResolve},
		{"u@servfail.test", true, transport.Temporary, transport.StageResolve},
		{"u@down.test", true, transport.Temporary, transport.StageResolve},
		{"u@loop.test", false, transport.Permanent, transport.StageResolve},
	}
	for _, tt := range tests {
		cfg := mxConfig(dnsSrv)
		cfg.Port = srv.Port
		if tt.loopback {
			cfg.Policy = loopbackOK
		}
		before := srv.Connections()
		err := transport.NewMX(cfg).Deliver(context.Background(), transport.Envelope{From: "s@sendonce.test", To: []string{tt.rcpt}}, mxMessage(tt.rcpt))
		if tt.class == 0 {
			if err != nil {
				t.Errorf("%s: Deliver: %v", tt.rcpt, err)
			}
			continue
		}
		var te *transport.Error
		if !errors.As(err, &te) {
			t.Errorf("%s: Deliver = %v, want a *transport.Error", tt.rcpt, err)
			continue
		}
		if te.Class != tt.class || te.Stage != tt.stage || te.Reached {
			t.Errorf("%s: class=%v stage=%s reached=%v (%v)", tt.rcpt, te.Class, te.Stage, te.Reached, te)
		}
		if srv.Connections() != before {
			t.Errorf("%s: the SMTP server was contacted", tt.rcpt)
		}
	}
	if n := len(srv.Messages()); n != 3 {
		t.Errorf("server got %d messages, want 3", n)
	}
}

func TestMXDeliverDNSOverTCP(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	dnsSrv := dnstest.StartWithOptions(t, dnstest.Options{
		Records:     []string{"tcp.test. MX 10 mx.tcp.test.", "mx.tcp.test. A 127.0.0.1"},
		TruncateUDP: true,
	})
	cfg := mxConfig(dnsSrv)
	cfg.Port, cfg.Policy = srv.Port, loopbackOK
	if err := transport.NewMX(cfg).Deliver(context.Background(), transport.Envelope{From: "s@sendonce.test", To: []string{"u@tcp.test"}}, mxMessage("tcp@sendonce.test")); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	for _, q := range dnsSrv.Queries() {
		if q.Net == "tcp" {
			return
		}
	}
	t.Error("no DNS query over TCP")
}

func TestMXDeliverResolverUnreachable(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	cfg := transport.MXConfig{Resolver: addr, DNSTimeout: time.Second}
	start := time.Now()
	te := mxDeliverErr(t, context.Background(), cfg, []string{"u@example.test"}, "dns@sendonce.test")
	mxCheckErr(t, te, transport.Temporary, transport.StageResolve, 0)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}

	// Without Resolver, resolv.conf must name one.
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(empty, []byte("search example.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, conf := range []string{filepath.Join(dir, "missing.conf"), empty} {
		cfg = transport.MXConfig{ResolvConf: conf}
		te = mxDeliverErr(t, context.Background(), cfg, []string{"u@example.test"}, "dns@sendonce.test")
		mxCheckErr(t, te, transport.Temporary, transport.StageResolve, 0)
		if !strings.Contains(te.Error(), conf) {
			t.Errorf("error does not name %s: %v", conf, te)
		}
	}
}

// Several recipient domains: all prepared up to RCPT, then sent in turn.
func TestMXDeliverMultiDomain(t *testing.T) {
	zone := []string{
		"a.test. MX 10 mx.a.test.", "mx.a.test. A 192.0.2.10",
		"b.test. MX 10 mx.b.test.", "mx.b.test. A 192.0.2.20",
		"c.test. MX 10 mx.c.test.", "mx.c.test. A 192.0.2.30",
	}
	to := []string{"x@a.test", "y@b.test", "z@A.test"}
	type setup struct {
		a, b smtptest.Behaviour
	}
	tests := []struct {
		name       string
		s          setup
		class      transport.Class // 0: delivered
		stage      string
		aGot, bGot int
		delivered  []string // for a partial delivery
	}{
		{"all accepted", setup{}, 0, "", 1, 1, nil},
		{"second domain refuses a recipient", setup{b: smtptest.Behaviour{RcptErr: mxErr550}}, transport.Permanent, transport.StageRcpt, 0, 0, nil},
		{"second domain greylists", setup{b: smtptest.Behaviour{RcptErr: mxErr451}}, transport.Temporary, transport.StageRcpt, 0, 0, nil},
		{"first domain refuses the message", setup{a: smtptest.Behaviour{DataErr: mxErr451}}, transport.Temporary, transport.StageDataEnd, 0, 0, nil},
		{"second domain refuses the message", setup{b: smtptest.Behaviour{DataErr: mxErr451}}, transport.Ambiguous, transport.StageDataEnd, 1, 0, []string{"x@a.test", "z@A.test"}},
		{"second domain hangs up before DATA", setup{b: smtptest.Behaviour{HangUpBeforeData: true}}, transport.Temporary, transport.StageMail, 0, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := smtptest.Start(t, smtptest.Options{}), smtptest.Start(t, smtptest.Options{})
			a.SetBehaviour(tt.s.a)
			b.SetBehaviour(tt.s.b)
			r := newRoutes(map[string]*smtptest.Server{"192.0.2.10": a, "192.0.2.20": b})
			cfg := mxConfig(dnstest.Start(t, zone...))
			cfg.DialContext = r.dial
			err := transport.NewMX(cfg).Deliver(context.Background(), transport.Envelope{From: "s@sendonce.test", To: to}, mxMessage("multi@sendonce.test"))
			if tt.class == 0 {
				if err != nil {
					t.Fatalf("Deliver: %v", err)
				}
				am, bm := a.Messages(), b.Messages()
				if len(am) != 1 || !slices.Equal(am[0].To, []string{"x@a.test", "z@A.test"}) || len(bm) != 1 || !slices.Equal(bm[0].To, []string{"y@b.test"}) {
					t.Errorf("a got %+v, b got %+v", am, bm)
				}
				return
			}
			var te *transport.Error
			if !errors.As(err, &te) {
				t.Fatalf("Deliver = %v", err)
			}
			mxCheckErr(t, te, tt.class, tt.stage, te.Code)
			if len(a.Messages()) != tt.aGot || len(b.Messages()) != tt.bGot {
				t.Errorf("a got %d messages, b got %d; want %d and %d", len(a.Messages()), len(b.Messages()), tt.aGot, tt.bGot)
			}
			var pe *transport.PartialDeliveryError
			switch {
			case tt.delivered == nil && errors.As(err, &pe):
				t.Errorf("unexpected partial delivery: %v", err)
			case tt.delivered != nil && !errors.As(err, &pe):
				t.Errorf("no *PartialDeliveryError in %v", err)
			case tt.delivered != nil:
				if !slices.Equal(pe.Delivered, tt.delivered) || !slices.Equal(pe.Undelivered, []string{"y@b.test"}) {
					t.Errorf("partial = %+v", pe)
				}
				if transport.ClassOf(err) != transport.Ambiguous {
					t.Errorf("ClassOf = %v", transport.ClassOf(err))
				}
			}
		})
	}
}

// A temporary failure of one domain leaves nothing delivered, so the retry
// delivers exactly once everywhere.
func TestMXDeliverMultiDomainRetryIsNotADuplicate(t *testing.T) {
	a, b := smtptest.Start(t, smtptest.Options{}), smtptest.Start(t, smtptest.Options{})
	b.SetBehaviour(smtptest.Behaviour{RcptErr: mxErr451})
	r := newRoutes(map[string]*smtptest.Server{"192.0.2.10": a, "192.0.2.20": b})
	cfg := mxConfig(dnstest.Start(t, "a.test. MX 10 mx.a.test.", "mx.a.test. A 192.0.2.10", "b.test. MX 10 mx.b.test.", "mx.b.test. A 192.0.2.20"))
	cfg.DialContext = r.dial
	tr := transport.NewMX(cfg)
	env := transport.Envelope{From: "s@sendonce.test", To: []string{"x@a.test", "y@b.test"}}
	if err := tr.Deliver(context.Background(), env, mxMessage("retry@sendonce.test")); transport.ClassOf(err) != transport.Temporary {
		t.Fatalf("first attempt = %v, want Temporary", err)
	}
	b.SetBehaviour(smtptest.Behaviour{})
	if err := tr.Deliver(context.Background(), env, mxMessage("retry@sendonce.test")); err != nil {
		t.Fatalf("retry: %v", err)
	}
	for name, s := range map[string]*smtptest.Server{"a": a, "b": b} {
		if c := s.MessageIDCounts()["retry@sendonce.test"]; c != 1 {
			t.Errorf("%s received the message %d times", name, c)
		}
	}
}

func TestMXDeliverEnvelopeErrors(t *testing.T) {
	dnsSrv := dnstest.Start(t)
	cfg := mxConfig(dnsSrv)
	cfg.MaxDomains = 2
	tests := []struct {
		name  string
		env   transport.Envelope
		stage string
	}{
		{"no recipients", transport.Envelope{From: "s@sendonce.test"}, transport.StageRcpt},
		{"no domain", transport.Envelope{From: "s@sendonce.test", To: []string{"postmaster"}}, transport.StageRcpt},
		{"address literal", transport.Envelope{From: "s@sendonce.test", To: []string{"u@[192.0.2.1]"}}, transport.StageRcpt},
		{"bad domain", transport.Envelope{From: "s@sendonce.test", To: []string{"u@bad_domain"}}, transport.StageRcpt},
		{"too many domains", transport.Envelope{From: "s@sendonce.test", To: []string{"u@a.test", "u@b.test", "u@c.test"}}, transport.StageRcpt},
		{"CRLF in sender", transport.Envelope{From: "s@sendonce.test\r\nRCPT TO:<x@y.test>", To: []string{"u@a.test"}}, transport.StageMail},
	}
	for _, tt := range tests {
		err := transport.NewMX(cfg).Deliver(context.Background(), tt.env, mxMessage("env@sendonce.test"))
		var te *transport.Error
		if !errors.As(err, &te) || te.Class != transport.Permanent || te.Stage != tt.stage {
			t.Errorf("%s: Deliver = %v, want Permanent at %s", tt.name, err, tt.stage)
		}
	}
	if n := len(dnsSrv.Queries()); n != 0 {
		t.Errorf("%d DNS queries for envelopes that cannot be sent", n)
	}
	bad := cfg
	bad.HELOName = "bad name"
	if te := mxDeliverErr(t, context.Background(), bad, []string{"u@a.test"}, "cfg@sendonce.test"); te.Class != transport.Temporary {
		t.Errorf("bad HELO name: %v", te)
	}
}

func TestMXDeliverContextCancelledDuringData(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	srv.SetBehaviour(smtptest.Behaviour{DelayData: 5 * time.Second})
	cfg := mxConfig(dnstest.Start(t, "slow.test. MX 10 mx.slow.test.", "mx.slow.test. A 127.0.0.1"))
	cfg.Port, cfg.Policy = srv.Port, loopbackOK
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	te := mxDeliverErr(t, ctx, cfg, []string{"u@slow.test"}, "slow@sendonce.test")
	mxCheckErr(t, te, transport.Ambiguous, transport.StageDataEnd, 0)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v after the context ended", d)
	}
}

func TestMXDeliverConcurrent(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	cfg := mxConfig(dnstest.Start(t, "con.test. MX 10 mx.con.test.", "mx.con.test. A 127.0.0.1"))
	cfg.Port, cfg.Policy = srv.Port, loopbackOK
	tr := transport.NewMX(cfg)
	const n = 6
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs <- tr.Deliver(context.Background(), transport.Envelope{From: "s@sendonce.test", To: []string{"u@con.test"}}, mxMessage(fmt.Sprintf("c%d@sendonce.test", i)))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := len(srv.MessageIDCounts()); got != n {
		t.Errorf("%d distinct messages, want %d", got, n)
	}
}
