package netpolicy_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

func TestPolicyCheck(t *testing.T) {
	tests := []struct {
		policy string
		addr   string
		ok     bool
	}{
		{"", "8.8.8.8", true},
		{"", "2a00:1450:4001:80b::200e", true},
		{"", "::ffff:8.8.8.8", true},
		{"", "127.0.0.1", false},
		{"", "::ffff:127.0.0.1", false},
		{"", "::ffff:0.0.0.0", false},
		{"", "0.0.0.0", false},
		{"", "::", false},
		{"", "::1", false},
		{"", "::127.0.0.1", false}, // IPv4-compatible
		{"", "10.1.2.3", false},
		{"", "172.16.0.1", false},
		{"", "192.168.1.1", false},
		{"", "100.64.0.1", false},
		{"", "169.254.169.254", false},
		{"", "::ffff:169.254.169.254", false},
		{"", "fd00::1", false},
		{"", "fe80::1", false},
		{"", "64:ff9b::7f00:1", false}, // NAT64 of 127.0.0.1
		{"", "2002:7f00:1::1", false},  // 6to4 of 127.0.0.1
		{"", "2001:db8::1", false},
		{"", "224.0.0.1", false},
		{"", "255.255.255.255", false},
		{"", "240.0.0.1", false},
		{"private", "127.0.0.1", true},
		{"private", "::ffff:127.0.0.1", true},
		{"private", "10.1.2.3", true},
		{"private", "fd00::1", true},
		{"private", "169.254.169.254", false}, // the metadata service is never "private"
		{"private", "::ffff:169.254.169.254", false},
		{"private", "fe80::1", false},
		{"169.254.0.0/16", "169.254.169.254", true},
		{"private", "0.0.0.0", false}, // never: the unspecified address is no destination
		{"private", "::ffff:0.0.0.0", false},
		{"private", "224.0.0.1", false},
		{"10.0.0.0/8", "10.9.9.9", true},
		{"10.0.0.0/8", "192.168.1.1", false},
		{"::ffff:10.0.0.0/104", "10.9.9.9", true},
		{"192.0.2.7", "192.0.2.7", true},
		{"192.0.2.7", "192.0.2.8", false},
	}
	for _, tt := range tests {
		p := netpolicy.MustParse(tt.policy)
		err := p.Check(netip.MustParseAddr(tt.addr))
		if (err == nil) != tt.ok {
			t.Errorf("policy %q, %s: Check = %v, want ok=%v", tt.policy, tt.addr, err, tt.ok)
		}
		if err != nil && !errors.Is(err, netpolicy.ErrBlocked) {
			t.Errorf("policy %q, %s: %v is not ErrBlocked", tt.policy, tt.addr, err)
		}
	}
	var nilPolicy *netpolicy.Policy
	if nilPolicy.Check(netip.MustParseAddr("127.0.0.1")) == nil {
		t.Error("a nil policy allows loopback")
	}
}

func TestParseRefusesGarbage(t *testing.T) {
	for _, s := range []string{"nope", "10.0.0.0/33", "::ffff:0:0/80"} {
		if _, err := netpolicy.Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

// listen returns the port of a TCP listener on 127.0.0.1 that counts the
// connections it accepts.
func listen(t *testing.T) (port string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n := make(chan struct{}, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n <- struct{}{}
			c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, func() int { time.Sleep(50 * time.Millisecond); return len(n) }
}

// TestDialerChecksResolvedAddresses resolves names through a real DNS
// server on loopback: the check runs on what the name resolves to at
// connect time, so a name that looks harmless (or answered a public address
// earlier) cannot reach loopback.
func TestDialerChecksResolvedAddresses(t *testing.T) {
	port, accepted := listen(t)
	dnsSrv := dnstest.Start(t,
		"mapped.test. AAAA ::ffff:127.0.0.1",
		"plain.test. A 127.0.0.1",
		"unspec.test. AAAA ::ffff:0.0.0.0",
	)
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dnsSrv.Addr())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, host := range []string{"mapped.test", "plain.test", "unspec.test", "127.0.0.1", "[::ffff:127.0.0.1]"} {
		d := netpolicy.MustParse("").Dialer(2 * time.Second)
		d.Resolver = resolver
		c, err := d.DialContext(ctx, "tcp", host+":"+port)
		if err == nil {
			c.Close()
			t.Errorf("%s: dialled, want blocked", host)
			continue
		}
		if !errors.Is(err, netpolicy.ErrBlocked) || netpolicy.Describe(err) != netpolicy.FailBlocked {
			t.Errorf("%s: err = %v (%s), want blocked", host, err, netpolicy.Describe(err))
		}
	}
	if n := accepted(); n != 0 {
		t.Errorf("the loopback listener accepted %d connections", n)
	}

	d := netpolicy.MustParse("private").Dialer(2 * time.Second)
	d.Resolver = resolver
	c, err := d.DialContext(ctx, "tcp", "mapped.test:"+port)
	if err != nil {
		t.Fatalf("with private allowed: %v", err)
	}
	c.Close()
}

func TestHTTPTransportBlocksLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the request reached the loopback server")
	}))
	defer srv.Close()
	client := &http.Client{Transport: netpolicy.MustParse("").HTTPTransport(), Timeout: 5 * time.Second}
	_, err := client.Get(srv.URL)
	if !errors.Is(err, netpolicy.ErrBlocked) {
		t.Fatalf("GET %s: %v, want blocked", srv.URL, err)
	}
	client = &http.Client{Transport: netpolicy.MustParse("127.0.0.0/8").HTTPTransport(), Timeout: 5 * time.Second}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	resp.Body.Close()
}

func TestDescribe(t *testing.T) {
	port, _ := listen(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	d := netpolicy.MustParse("private").Dialer(time.Second)
	_, err := d.DialContext(context.Background(), "tcp", closed)
	if got := netpolicy.Describe(err); got != netpolicy.FailRefused {
		t.Errorf("closed port: %q (%v)", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	_, err = d.DialContext(ctx, "tcp", "127.0.0.1:"+port)
	if got := netpolicy.Describe(err); got != netpolicy.FailTimeout {
		t.Errorf("expired context: %q (%v)", got, err)
	}
}
