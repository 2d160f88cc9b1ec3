package transport

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The shipped rules: the providers' limits by MX suffix (rolled up into
// one site), the default for the rest, and which deferrals mean slow down.
func TestShaping_Shipped(t *testing.T) {
	sh := DefaultShaping()
	for _, c := range []struct {
		domain, mx, site string
		conns, perConn   int
	}{
		{"gmail.com", "gmail-smtp-in.l.google.com", "site:google", 5, 50},
		{"example.org", "aspmx.l.google.com", "site:google", 5, 50},
		{"hotmail.com", "hotmail-com.olc.protection.outlook.com", "site:outlook", 5, 50},
		{"yahoo.com", "mta5.am0.yahoodns.net", "site:yahoo", 10, 20},
		{"contoso.com", "contoso-com.mail.protection.outlook.com", "site:office365", 5, 50},
		{"icloud.com", "mx01.mail.icloud.com", "site:apple", 10, 5},
		{"example.net", "mx.example.net", "", 10, 100},
		{"notgoogle.com", "mx.notgoogle.com", "", 10, 100},
	} {
		l, _, site := sh.limitsFor([]string{c.domain}, c.mx)
		if site != c.site || l.MaxConnections != c.conns || l.MaxMessagesPerConnection != c.perConn {
			t.Errorf("%s (MX %s): site %q, %d connections × %d, want %q, %d × %d", c.domain, c.mx, site, l.MaxConnections, l.MaxMessagesPerConnection, c.site, c.conns, c.perConn)
		}
	}
	for _, c := range []struct {
		code   int
		text   string
		action string
	}{
		{421, "4.7.0 Too many concurrent SMTP connections", SlowConnections},
		{421, "4.7.28 Our system has detected an unusual rate of unsolicited mail", SlowRate},
		{451, "4.7.651 The mail server IP connecting to Outlook.com server has exceeded the rate limit", SlowRate},
		{421, "4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume", SlowPause},
		{421, "4.7.0 [TS03] All messages from 192.0.2.1 will be permanently deferred", SlowRate},
		{421, "4.7.0 Messages from 192.0.2.1 temporarily deferred due to user complaints", SlowRate},
		{421, "4.3.2 Service not available, try again later", SlowPause},
		{451, "4.7.1 greylisted, try again later", ""},
		{450, "4.2.0 mailbox busy", ""},
		{550, "5.7.1 too many connections", ""},
	} {
		r := sh.slowDown(c.code, c.text)
		got := ""
		if r != nil {
			got = r.Action
		}
		if got != c.action {
			t.Errorf("%d %s: action %q, want %q", c.code, c.text, got, c.action)
		}
	}
}

// An operator's file overrides the default and a shipped rule by name,
// adds rules tried first, and refuses unknown fields.
func TestShaping_File(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shaping.json")
	if err := os.WriteFile(path, []byte(`{
		"default": {"max_connections": 3},
		"rules": [
			{"name": "google", "mx_suffix": ["google.com"], "rollup": true, "max_messages_per_second": 2},
			{"name": "corp", "domains": ["corp.example"], "max_connections": 1}
		],
		"slow_down": [{"match": "slow down please", "action": "pause", "for": "2s"}]
	}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sh, err := LoadShaping(path)
	if err != nil {
		t.Fatal(err)
	}
	if l, _, _ := sh.limitsFor([]string{"x.example"}, "mx.x.example"); l.MaxConnections != 3 || l.MaxMessagesPerConnection != 100 {
		t.Errorf("default %+v", l)
	}
	if l, _, _ := sh.limitsFor([]string{"gmail.com"}, "a.google.com"); l.MaxConnections != 3 || l.MaxMessagesPerSecond != 2 {
		t.Errorf("google replaced: %+v (the override's unset fields come from the default)", l)
	}
	if l, rule, _ := sh.limitsFor([]string{"corp.example"}, "mx.google.com"); rule != "corp" || l.MaxConnections != 1 {
		t.Errorf("domain rule: %s %+v", rule, l)
	}
	if r := sh.slowDown(421, "4.7.0 slow down please"); r == nil || r.Action != SlowPause || time.Duration(r.For) != 2*time.Second {
		t.Errorf("added slow-down rule: %+v", r)
	}
	if r := sh.slowDown(421, "4.7.0 Too many connections"); r == nil || r.Action != SlowConnections {
		t.Errorf("shipped slow-down rules kept: %+v", r)
	}
	if err := os.WriteFile(path, []byte(`{"default": {"max_conections": 3}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadShaping(path); err == nil {
		t.Error("a misspelt field was accepted")
	}
}

// A slow-down reply lowers a destination's limits for every message, and
// clean deliveries bring them back.
func TestShaper_SlowDownAndRecover(t *testing.T) {
	now := time.Unix(1000, 0)
	sh := newShaper(DefaultShaping())
	sh.now = func() time.Time { return now }
	limits := Limits{MaxConnections: 4, MaxMessagesPerConnection: 10, IdleTimeout: Duration(time.Minute), RecoverAfter: 3, RecoverInterval: Duration(time.Minute)}
	s := sh.site("x", limits, "test")
	var leases []*lease
	for range 4 {
		l, _, _ := s.acquire(nil)
		if l == nil {
			t.Fatal("no lease within the limit")
		}
		leases = append(leases, l)
	}
	if l, at, why := s.acquire(nil); l != nil || at.IsZero() || why == "" {
		t.Fatalf("a fifth connection: %v %v %q", l, at, why)
	}
	// The fourth was refused "too many connections": three others are open.
	s.slowDown(&SlowDownRule{Action: SlowConnections}, "421 too many connections")
	leases[3].done(nil, false, 0)
	if s.conns != 3 {
		t.Errorf("limit %d after the refusal with 3 others open, want 3", s.conns)
	}
	// A rate reply pauses the destination for everyone.
	until := s.slowDown(&SlowDownRule{Action: SlowRate, For: Duration(time.Minute)}, "421 4.7.28 rate")
	if l, at, _ := s.acquire(nil); l != nil || at.Before(now.Add(time.Minute)) || until.Before(now.Add(time.Minute)) {
		t.Errorf("paused destination gave a lease, or a time before the pause ends: %v %v", at, until)
	}
	now = now.Add(2 * time.Minute)
	for _, l := range leases[:3] {
		l.done(nil, true, 10*time.Millisecond)
	}
	if s.conns < 2 {
		t.Errorf("limit %d after clean deliveries past the recovery interval, want it raised", s.conns)
	}
}

// Destinations unused for an hour, with nothing open and their limits
// back to the file's, are forgotten.
func TestShaper_ForgetsIdleDestinations(t *testing.T) {
	now := time.Unix(1000, 0)
	sh := newShaper(DefaultShaping())
	sh.now = func() time.Time { return now }
	limits := Limits{MaxConnections: 2, MaxMessagesPerConnection: 10, IdleTimeout: Duration(time.Minute)}
	sh.site("old", limits, "test")
	busy := sh.site("busy", limits, "test")
	l, _, _ := busy.acquire(nil) // a connection open: kept
	now = now.Add(2 * time.Hour)
	for range sweepEvery {
		sh.site("new", limits, "test")
	}
	sh.mu.Lock()
	_, old := sh.sites["old"]
	_, kept := sh.sites["busy"]
	sh.mu.Unlock()
	if old || !kept {
		t.Errorf("after the sweep: old kept %v, busy kept %v; want false, true", old, kept)
	}
	l.done(nil, true, time.Millisecond)
}

// TestShaper_ResumedOnceBackAtFullLimits: after a slow-down, clean
// deliveries step the limits back up; the delivery that reaches the
// file's limits says so, once (the "destination resumed" log line and
// counter), and later clean deliveries do not say it again.
func TestShaper_ResumedOnceBackAtFullLimits(t *testing.T) {
	now := time.Unix(1000, 0)
	sh := newShaper(DefaultShaping())
	sh.now = func() time.Time { return now }
	s := sh.site("d", Limits{MaxConnections: 4, MaxMessagesPerConnection: 10, IdleTimeout: Duration(time.Minute),
		RecoverAfter: 1, RecoverInterval: Duration(time.Second)}, "test")
	l, _, _ := s.acquire(nil)
	s.slowDown(&SlowDownRule{Action: SlowConnections}, "421 too many connections")
	l.done(nil, false, 0)
	resumed := 0
	for range 10 {
		now = now.Add(2 * time.Second)
		l, _, _ := s.acquire(nil)
		if l == nil {
			t.Fatal("no lease")
		}
		if l.done(nil, true, time.Millisecond) {
			resumed++
		}
	}
	if resumed != 1 || s.conns != 4 {
		t.Fatalf("resumed %d times, limit %d; want once, back at 4", resumed, s.conns)
	}
}
