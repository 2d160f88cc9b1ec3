package verp

import (
	"strings"
	"testing"
)

// FuzzParse reads arbitrary bounce addresses, as strangers write them to
// the inbound listener: only an address this signer made (in any case,
// with surrounding space) names a send; everything else is ErrInvalid,
// never a panic or another send.
func FuzzParse(f *testing.F) {
	s := New([]byte("0123456789abcdef0123456789abcdef"), "bounces.example.com")
	for _, a := range []string{
		s.Address("snd_01jabc"), s.RecipientAddress("snd_01jabc", 3), strings.ToUpper(s.Address("snd_x")),
		"bounce+01jabc-deadbeef@bounces.example.com", "bounce+.1-x@bounces.example.com", "bounce+a.01-x@bounces.example.com",
		"bounce+-@bounces.example.com", "@", "", "bounce+a.99999-x@bounces.example.com", " bounce+a-b@BOUNCES.example.com ",
	} {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, address string) {
		id, rcpt, err := s.Parse(address)
		if err != nil {
			if err != ErrInvalid || id != "" {
				t.Fatalf("Parse(%q): %q %v, want ErrInvalid alone", address, id, err)
			}
			return
		}
		made := s.Address(id)
		if rcpt >= 0 {
			made = s.RecipientAddress(id, rcpt)
		}
		if got := strings.ToLower(strings.TrimSpace(address)); got != strings.ToLower(made) {
			t.Fatalf("Parse(%q) named %s (recipient %d), whose address is %q", address, id, rcpt, made)
		}
	})
}
