package dnsresolve

import "strings"

// ValidLabel reports whether l is a host name label (RFC 1123): 1 to 63
// letters, digits and hyphens, neither first nor last a hyphen.
func ValidLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidHostName reports whether every dot-separated label of s is a
// ValidLabel (one final dot allowed). Length limits of the whole name are
// the caller's: they depend on what is appended to it.
func ValidHostName(s string) bool {
	for _, l := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if !ValidLabel(l) {
			return false
		}
	}
	return true
}
