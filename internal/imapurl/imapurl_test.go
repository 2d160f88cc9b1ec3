package imapurl

import (
	"bytes"
	"strings"
	"testing"
)

func TestParse_ReadsTheFormsAndRefusesTheRest(t *testing.T) {
	good := []struct {
		url  string
		want Config
		red  string
	}{
		{"imaps://me%40x.com:p%40ss@imap.gmail.com", Config{Host: "imap.gmail.com", Port: 993, User: "me@x.com", Password: "p@ss", TLS: TLSImplicit, Inbox: "INBOX"},
			"imaps://me%40x.com@imap.gmail.com:993"},
		{"imap://u:p@127.0.0.1:1143?tls=none&sent=Sent%20Items", Config{Host: "127.0.0.1", Port: 1143, User: "u", Password: "p", TLS: TLSNone, Inbox: "INBOX", Sent: "Sent Items"},
			"imap://u@127.0.0.1:1143?sent=Sent+Items&tls=none"},
		{"imap://u:p@[::1]?inbox=Support", Config{Host: "::1", Port: 143, User: "u", Password: "p", TLS: TLSStartTLS, Inbox: "Support"},
			"imap://u@[::1]:143?inbox=Support"},
	}
	for _, g := range good {
		c, err := Parse(g.url)
		if err != nil || c != g.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", g.url, c, err, g.want)
			continue
		}
		if r := c.Redacted(); r != g.red || strings.Contains(r, ":"+c.Password+"@") {
			t.Errorf("Redacted() = %q, want %q", r, g.red)
		}
	}
	for _, bad := range []string{
		"", "smtp://u:p@h", "imaps://h", "imaps://u@h", "imaps://u:p@", "imaps://u:p@h:0", "imaps://u:p@h:99999",
		"imaps://u:p@h?tls=none", "imap://u:p@h?tls=tls", "imap://u:p@h/INBOX", "imap://u:p@h?x=1", "imap://u:p@h?sent=",
		"imap://u:secret@h?sent=a%0db", strings.Repeat("x", MaxLen+1),
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q) error shows the password: %v", bad, err)
		}
	}
}

func TestSeal_KeepsThePasswordUnreadable(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef"
	url := "imaps://u:hunter2@h"
	stored, err := Seal(url, key)
	if err != nil || bytes.Contains(stored, []byte("hunter2")) {
		t.Fatalf("Seal = %q, %v", stored, err)
	}
	if got, err := Open(stored, key); err != nil || got != url {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := Open(stored, ""); err != ErrSecretKey {
		t.Fatalf("Open without the key: %v", err)
	}
	if _, err := Open(stored, key+"x"); err != ErrSecretKey {
		t.Fatalf("Open with another key: %v", err)
	}
	if plain, _ := Seal(url, ""); string(plain) != url {
		t.Fatalf("without a key the URL is kept as is, got %q", plain)
	}
}
