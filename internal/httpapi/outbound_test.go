package httpapi_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestMailboxRelay_OutboundPolicy: a relay a tenant admin sets through the
// API may not point inside the host or its networks. Address literals are
// refused when the mailbox is stored; a name is judged on what it resolves
// to when it is dialled, by the status check and by deliveries alike. The
// operator's --transport (here smtp://127.0.0.1:…) stays trusted.
func TestMailboxRelay_OutboundPolicy(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, AllowNoKey: true, StrictOutbound: true})
	do := func(method, path string, body any) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: method, Path: path, Key: env.AdminKey, Body: body})
	}
	port := env.SMTP.Port
	for _, host := range []string{"127.0.0.1", "[::ffff:127.0.0.1]", "[::1]", "10.0.0.1", "169.254.169.254", "0.0.0.0"} {
		r := do("POST", "/v1/mailboxes", map[string]any{"id": "inside", "address": "in@example.com", "transport": "smtp://" + host + ":" + port + "?tls=none"})
		if r.Status != 422 || r.ErrorCode() != "validation_error" {
			t.Errorf("mailbox relay on %s: %d %s, want 422", host, r.Status, r.Body)
		}
	}

	// A name that resolves to loopback is stored; it is refused at connect.
	if r := do("POST", "/v1/mailboxes", map[string]any{"id": "named", "address": "named@example.com", "transport": "smtp://localhost:" + port + "?tls=none"}); r.Status != 201 {
		t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
	}
	st := do("GET", "/api/public/v1/mailboxes/named/status", nil).JSON(t)
	if st["can_send"] != false || st["error"] != "blocked by the outbound policy" {
		t.Fatalf("status of a relay on localhost: %v", st)
	}
	r := do("POST", "/v1/send", map[string]any{"mailbox_id": "named", "to": "ann@example.com", "subject": "inside", "text": "x"})
	if r.Status != 200 {
		t.Fatalf("send: %d %s", r.Status, r.Body)
	}
	s := env.WaitStatus(t, r.JSON(t)["id"].(string), 20*time.Second, core.StatusFailed)
	if le, _ := s["last_error"].(string); !strings.Contains(le, "outbound policy") {
		t.Errorf("last_error %q, want the policy named", le)
	}
	if n := env.SMTP.Connections(); n != 0 {
		t.Errorf("the loopback relay got %d connections from a tenant's mailbox", n)
	}

	// The operator's relay on loopback is trusted.
	r = do("POST", "/v1/send", map[string]any{"to": "ann@example.com", "subject": "operator", "text": "x"})
	env.WaitStatus(t, r.JSON(t)["id"].(string), 20*time.Second, core.StatusSent)
}

// TestMailboxStatus_ReportsClassesNotBanners: the status route says
// refused, timed out or which SMTP code at which stage; never what the
// remote side wrote, so it cannot be used to fingerprint services.
func TestMailboxStatus_ReportsClassesNotBanners(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true})
	do := func(method, path string, body any) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: method, Path: path, Key: env.AdminKey, Body: body})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("554 internal-billing-db 9.4.1 (debian) not for you\r\n"))
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	for _, mb := range []struct{ id, addr, want string }{
		{"banner", ln.Addr().String(), "the relay answered 554 at greeting"},
		{"closed", closedAddr, "connection refused"},
	} {
		if r := do("POST", "/v1/mailboxes", map[string]any{"id": mb.id, "address": mb.id + "@example.com", "transport": "smtp://" + mb.addr + "?tls=none"}); r.Status != 201 {
			t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
		}
		st := do("GET", "/api/public/v1/mailboxes/"+mb.id+"/status", nil).JSON(t)
		if st["can_send"] != false || st["error"] != mb.want {
			t.Errorf("status of %s: %v, want error %q", mb.id, st, mb.want)
		}
	}
}
