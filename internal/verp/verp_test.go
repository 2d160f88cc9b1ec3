package verp

import (
	"strings"
	"testing"
)

func TestAddress_RoundTrips(t *testing.T) {
	s := New([]byte("k1"), "Bounces.Example.com.")
	id := "snd_01jabcdefghjkmnpqrstvwxyz0"
	a := s.Address(id)
	if !strings.HasPrefix(a, "bounce+") || !strings.HasSuffix(a, "@bounces.example.com") {
		t.Fatalf("address %q", a)
	}
	if local, _, _ := strings.Cut(a, "@"); len(local) > 64 {
		t.Fatalf("local part %d characters: over RFC 5321's 64", len(local))
	}
	for _, in := range []string{a, strings.ToUpper(a), " " + a + " "} {
		got, err := s.SendID(in)
		if err != nil || got != id {
			t.Fatalf("SendID(%q) = %q, %v; want %q", in, got, err, id)
		}
	}
}

func TestSendID_RejectsForgeries(t *testing.T) {
	s := New([]byte("k1"), "b.example")
	good := s.Address("snd_01jabcdefghjkmnpqrstvwxyz0")
	local, _, _ := strings.Cut(good, "@")
	id, mac, _ := strings.Cut(strings.TrimPrefix(local, "bounce+"), "-")
	flip := func(s string) string {
		b := []byte(s)
		if b[0] == 'a' {
			b[0] = 'b'
		} else {
			b[0] = 'a'
		}
		return string(b)
	}
	for name, a := range map[string]string{
		"other key":    New([]byte("k2"), "b.example").Address("snd_01jabcdefghjkmnpqrstvwxyz0"),
		"other domain": "bounce+" + id + "-" + mac + "@c.example",
		"altered id":   "bounce+" + flip(id) + "-" + mac + "@b.example",
		"altered mac":  "bounce+" + id + "-" + flip(mac) + "@b.example",
		"no mac":       "bounce+" + id + "@b.example",
		"empty mac":    "bounce+" + id + "-@b.example",
		"no prefix":    id + "-" + mac + "@b.example",
		"no at":        "bounce+" + id + "-" + mac,
		"empty":        "",
	} {
		if got, err := s.SendID(a); err == nil {
			t.Errorf("%s: %q verified as %q", name, a, got)
		}
	}
}

// A token bound to one recipient verifies for that recipient's index
// only, and never as the send's own token or another index's.
func TestRecipientAddress_BoundToOneRecipient(t *testing.T) {
	s := New([]byte("k"), "bounces.example.test")
	const id = "snd_01j0000000000000000000000a"
	a := s.RecipientAddress(id, 1)
	if got, rcpt, err := s.Parse(a); err != nil || got != id || rcpt != 1 {
		t.Fatalf("Parse(%s) = %q %d %v", a, got, rcpt, err)
	}
	if got, rcpt, err := s.Parse(s.Address(id)); err != nil || got != id || rcpt != -1 {
		t.Fatalf("the send's own address: %q %d %v, want rcpt -1", got, rcpt, err)
	}
	other := strings.Replace(a, ".1-", ".2-", 1)
	if _, _, err := s.Parse(other); err == nil {
		t.Errorf("%s verified with another index", other)
	}
	if _, _, err := s.Parse(strings.Replace(a, ".1-", "-", 1)); err == nil {
		t.Error("a bound token's MAC verified as the send's own")
	}
	if local, _, _ := strings.Cut(a, "@"); len(local) > 64 {
		t.Errorf("local part %d characters, over 64", len(local))
	}
}
