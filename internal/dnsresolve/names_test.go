package dnsresolve

import "testing"

func TestValidHostName(t *testing.T) {
	for s, want := range map[string]bool{
		"example.com": true, "mail-1.example.com.": true, "a": true, "xn--bcher-kva.example": true,
		"": false, "-a.example": false, "a-.example": false, "a..example": false, "a_b.example": false,
		"é.example": false, string(make([]byte, 64)) + ".example": false,
	} {
		if got := ValidHostName(s); got != want {
			t.Errorf("ValidHostName(%q) = %v, want %v", s, got, want)
		}
	}
}
