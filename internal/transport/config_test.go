package transport_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/transport"
)

func TestParseSMTPURL(t *testing.T) {
	tests := []struct {
		in   string
		want transport.SMTPConfig
	}{
		{"smtp://relay.example.com", transport.SMTPConfig{Host: "relay.example.com", Port: "25"}},
		{"smtp://relay.example.com:2525", transport.SMTPConfig{Host: "relay.example.com", Port: "2525"}},
		{"smtp://relay.example.com/", transport.SMTPConfig{Host: "relay.example.com", Port: "25"}},
		{"SMTP://relay.example.com", transport.SMTPConfig{Host: "relay.example.com", Port: "25"}},
		{"smtp://relay.example.com?tls=none", transport.SMTPConfig{Host: "relay.example.com", Port: "25", TLS: transport.TLSNone}},
		{"smtp://relay.example.com:587?tls=starttls", transport.SMTPConfig{Host: "relay.example.com", Port: "587", TLS: transport.TLSStartTLS}},
		{"smtp://relay.example.com?tls=STARTTLS", transport.SMTPConfig{Host: "relay.example.com", Port: "25", TLS: transport.TLSStartTLS}},
		{"smtp://relay.example.com?tls=tls", transport.SMTPConfig{Host: "relay.example.com", Port: "465", TLS: transport.TLSImplicit}},
		{"smtps://relay.example.com", transport.SMTPConfig{Host: "relay.example.com", Port: "465", TLS: transport.TLSImplicit}},
		{"smtps://relay.example.com:4650?tls=tls", transport.SMTPConfig{Host: "relay.example.com", Port: "4650", TLS: transport.TLSImplicit}},
		{"smtp://127.0.0.1:1025", transport.SMTPConfig{Host: "127.0.0.1", Port: "1025"}},
		{"smtp://[::1]:1025", transport.SMTPConfig{Host: "::1", Port: "1025"}},
		{"smtp://bob:secret@relay.example.com", transport.SMTPConfig{Host: "relay.example.com", Port: "25", Username: "bob", Password: "secret"}},
		{"smtp://bob%40example.com:p%40ss%3Aw%2Frd@relay.example.com:587?tls=starttls",
			transport.SMTPConfig{Host: "relay.example.com", Port: "587", Username: "bob@example.com", Password: "p@ss:w/rd", TLS: transport.TLSStartTLS}},
		{"smtp://apikey@relay.example.com", transport.SMTPConfig{Host: "relay.example.com", Port: "25", Username: "apikey"}},
	}
	for _, tt := range tests {
		got, err := transport.ParseSMTPURL(tt.in)
		if err != nil {
			t.Errorf("ParseSMTPURL(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseSMTPURL(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseSMTPURLErrors(t *testing.T) {
	const pw = "hunter2secret"
	bad := []string{
		"",
		"relay.example.com:25",
		"http://relay.example.com",
		"smtp://",
		"smtp://:25",
		"smtp://relay.example.com?tls=ssl",
		"smtp://relay.example.com?tls=",
		"smtp://relay.example.com?tls=tls&tls=none",
		"smtp://relay.example.com?tsl=tls",
		"smtps://relay.example.com?tls=starttls",
		"smtp://relay.example.com:0",
		"smtp://relay.example.com:70000",
		"smtp://relay.example.com:smtp",
		"smtp://relay.example.com/path",
		"smtp://relay.example.com#frag",
		"smtp:relay.example.com",
		"smtp://:" + pw + "@relay.example.com",
		"smtp://bob:" + pw + "%zz@relay.example.com",
		"smtp://bob:" + pw + "@relay.example.com:2x5",
		"smtp://bob:" + pw + "@relay.example.com?tls=bogus",
		"smtp://bob:" + pw + "@relay example.com",
	}
	for _, in := range bad {
		_, err := transport.ParseSMTPURL(in)
		if err == nil {
			t.Errorf("ParseSMTPURL(%q) succeeded, want an error", in)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("ParseSMTPURL(%q) error reveals the password: %v", in, err)
		}
	}
}

func TestRedacted(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"smtp://bob:secret@relay.example.com:587?tls=starttls", "smtp://bob:xxxxx@relay.example.com:587?tls=starttls"},
		{"smtps://bob:secret@relay.example.com", "smtp://bob:xxxxx@relay.example.com:465?tls=tls"},
		{"smtp://apikey@relay.example.com", "smtp://apikey@relay.example.com:25"},
		{"smtp://relay.example.com", "smtp://relay.example.com:25"},
		{"smtp://[::1]:1025?tls=none", "smtp://[::1]:1025?tls=none"},
		{"smtp://bob%40example.com:p%40ss@relay.example.com", "smtp://bob%40example.com:xxxxx@relay.example.com:25"},
	}
	for _, tt := range tests {
		cfg, err := transport.ParseSMTPURL(tt.in)
		if err != nil {
			t.Fatalf("ParseSMTPURL(%q): %v", tt.in, err)
		}
		got := cfg.Redacted()
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Redacted(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if cfg.Password != "" && strings.Contains(got, cfg.Password) {
			t.Errorf("Redacted(%q) = %q reveals the password", tt.in, got)
		}
		// The redacted form parses back to the same settings.
		back, err := transport.ParseSMTPURL(got)
		if err != nil {
			t.Errorf("ParseSMTPURL(Redacted(%q)): %v", tt.in, err)
			continue
		}
		if cfg.Password != "" {
			back.Password = cfg.Password
		}
		if !reflect.DeepEqual(back, cfg) {
			t.Errorf("round trip of %q: got %+v, want %+v", tt.in, back, cfg)
		}
	}
}
