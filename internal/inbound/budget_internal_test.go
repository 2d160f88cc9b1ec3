package inbound

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// TestBudget_ConcurrentMessagesShareIt: while one session holds part of
// a message, another cannot take more than what is left; once the first
// gives its reservation back, it can. (io.Pipe makes "holds" exact: a
// write returns only when the reader has taken the bytes into the
// buffer it reserved.)
func TestBudget_ConcurrentMessagesShareIt(t *testing.T) {
	b := newBudget(256 << 10)
	pr, pw := io.Pipe()
	type result struct {
		raw     []byte
		release func()
		err     error
	}
	first := make(chan result, 1)
	go func() {
		raw, release, err := b.readAll(pr, 10<<20)
		first <- result{raw, release, err}
	}()
	if _, err := pw.Write(make([]byte, 150<<10)); err != nil { // held: 256 KiB reserved
		t.Fatal(err)
	}
	_, release, err := b.readAll(bytes.NewReader(make([]byte, 100<<10)), 10<<20)
	release()
	if !errors.Is(err, errBudget) {
		t.Fatalf("a second message while the first holds the budget: %v, want errBudget", err)
	}
	pw.Close()
	r := <-first
	if r.err != nil || len(r.raw) != 150<<10 {
		t.Fatalf("first message: %d bytes, %v", len(r.raw), r.err)
	}
	r.release()
	raw, release, err := b.readAll(bytes.NewReader(make([]byte, 100<<10)), 10<<20)
	release()
	if err != nil || len(raw) != 100<<10 {
		t.Fatalf("a message once the first gave its reservation back: %d bytes, %v", len(raw), err)
	}
}

// TestClientKey_IPv6CountsPerSlash64: a host is given a whole IPv6 /64,
// so the per-client bound counts /64s; IPv4 (mapped too) per address.
func TestClientKey_IPv6CountsPerSlash64(t *testing.T) {
	key := func(s string) string { return clientKey(&net.TCPAddr{IP: net.ParseIP(s), Port: 25}) }
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
