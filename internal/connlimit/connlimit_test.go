package connlimit

import (
	"net"
	"testing"
)

// TestClientKey_IPv6CountsPerSlash64: a host is given a whole IPv6 /64,
// so the per-client bound counts /64s; IPv4 (mapped too) per address.
func TestClientKey_IPv6CountsPerSlash64(t *testing.T) {
	key := func(s string) string { return ClientKey(&net.TCPAddr{IP: net.ParseIP(s), Port: 25}) }
	if a, b := key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff:ffff:ffff:ffff"); a != b {
		t.Fatalf("two addresses of one /64: %q and %q, want one client", a, b)
	}
	if a, b := key("2001:db8:1:2::1"), key("2001:db8:1:3::1"); a == b {
		t.Fatalf("two /64s: both %q, want two clients", a)
	}
	if a, b := key("192.0.2.1"), key("::ffff:192.0.2.1"); a != b || a != "192.0.2.1" {
		t.Fatalf("IPv4 %q and mapped %q, want 192.0.2.1", a, b)
	}
	if a, b := key("192.0.2.1"), key("192.0.2.2"); a == b {
		t.Fatalf("two IPv4 addresses: both %q", a)
	}
}
