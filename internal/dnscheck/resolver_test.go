package dnscheck

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSystemResolver(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		path, want string
	}{
		{write("v4.conf", "# comment\nsearch example.test\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"), "192.0.2.53:53"},
		{write("v6.conf", "nameserver 2001:db8::53\n"), "[2001:db8::53]:53"},
	}
	for _, tt := range tests {
		got, err := systemResolver(tt.path)
		if err != nil || got != tt.want {
			t.Errorf("systemResolver(%s) = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
	for _, p := range []string{write("empty.conf", "options ndots:2\n"), filepath.Join(dir, "missing.conf")} {
		if got, err := systemResolver(p); err == nil {
			t.Errorf("systemResolver(%s) = %q, want an error", p, got)
		}
	}
}

func TestResolverAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5353": "127.0.0.1:5353",
		"127.0.0.1":      "127.0.0.1:53",
		"[::1]":          "[::1]:53",
		"::1":            "[::1]:53",
		"[::1]:5353":     "[::1]:5353",
		"dns.example":    "dns.example:53",
	} {
		if got, err := resolverAddr(in); err != nil || got != want {
			t.Errorf("resolverAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "bad host", "a/b"} {
		if got, err := resolverAddr(in); err == nil {
			t.Errorf("resolverAddr(%q) = %q, want an error", in, got)
		}
	}
}
