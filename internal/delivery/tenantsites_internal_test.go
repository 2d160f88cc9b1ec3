package delivery

import (
	"fmt"
	"testing"
	"time"
)

// TestReplyClass: a tenant is shown a remote reply's codes, never its
// text.
func TestReplyClass(t *testing.T) {
	for reply, want := range map[string]string{
		"": "",
		"421 4.7.0 Too many concurrent SMTP connections": "421 4.7.0",
		"451-4.7.1 Rate limited for bob@other.example":   "451-4.7.1",
		"450 Try later, acme-corp is over quota":         "450",
		"connection reset by peer":                       "slowed down by the destination's reply",
	} {
		if got := replyClass(reply); got != want {
			t.Errorf("replyClass(%q) = %q, want %q", reply, got, want)
		}
	}
}

// TestTenantSites_Bounded: a tenant's remembered destinations stay within
// maxTenantSites, the least recently used forgotten first.
func TestTenantSites_Bounded(t *testing.T) {
	var ts tenantSites
	start := time.Unix(0, 0)
	for i := range maxTenantSites + 10 {
		ts.note("t", fmt.Sprint("site-", i), start.Add(time.Duration(i)*time.Second))
	}
	if n := len(ts.m["t"]); n != maxTenantSites {
		t.Errorf("%d sites remembered, want %d", n, maxTenantSites)
	}
	if ts.has("t", "site-0") || !ts.has("t", fmt.Sprint("site-", maxTenantSites+9)) || ts.has("u", "site-1") {
		t.Error("the oldest should be forgotten, the newest kept, and another tenant has none")
	}
}
