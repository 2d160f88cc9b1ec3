package transport

import (
	"net/netip"
	"testing"
)

func TestParseSource(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Source
		ok   bool
	}{
		{"a=192.0.2.1", Source{Name: "a", IP: netip.MustParseAddr("192.0.2.1")}, true},
		{"b=2001:db8::1,ehlo=mx-b.example.com", Source{Name: "b", IP: netip.MustParseAddr("2001:db8::1"), EHLO: "mx-b.example.com"}, true},
		{"=192.0.2.1", Source{}, false},
		{"a=not-an-ip", Source{}, false},
		{"a=192.0.2.1,helo=x.example", Source{}, false},
		{"a=192.0.2.1,ehlo=bad name", Source{}, false},
		{"a", Source{}, false},
	} {
		got, err := ParseSource(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseSource(%q) = %+v, %v", c.in, got, err)
		}
	}
}
