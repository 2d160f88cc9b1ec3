package mcpserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/mcpserver"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// quarantineZone publishes DMARC p=reject for two domains: forged.test,
// whose SPF allows another address than the test's loopback (so a message
// from it over loopback, unsigned, fails DMARC), and friend.test, whose
// SPF allows loopback (an aligned pass).
var quarantineZone = []string{
	`forged.test. TXT "v=spf1 ip4:192.0.2.1 -all"`,
	`_dmarc.forged.test. TXT "v=DMARC1; p=reject"`,
	`friend.test. TXT "v=spf1 ip4:127.0.0.0/8 -all"`,
	`_dmarc.friend.test. TXT "v=DMARC1; p=reject"`,
}

func quarantineMail(from, subject, msgID string) []byte {
	return []byte(strings.ReplaceAll("From: "+from+"\nTo: support@example.com\nSubject: "+subject+
		"\nMessage-ID: <"+msgID+">\nDate: Wed, 02 Dec 2026 05:00:00 +0000\nMIME-Version: 1.0\n"+
		"Content-Type: text/plain\n\nPlease wire the money today.\n", "\n", "\r\n"))
}

// smtpDeliver hands raw to the inbound listener at addr as an MTA would.
func smtpDeliver(t *testing.T, addr, mailFrom, rcpt string, raw []byte) {
	t.Helper()
	if _, err := smtptest.Deliver(t, addr, mailFrom, rcpt, raw); err != nil {
		t.Fatalf("deliver: %v", err)
	}
}

// receivedIDs lists GET path's received messages' ids (nil on a non-200).
func receivedIDs(t *testing.T, env *sendoncetest.Env, key, path string) (int, map[string]map[string]any) {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: path, Key: key})
	if r.Status != http.StatusOK {
		return r.Status, nil
	}
	out := map[string]map[string]any{}
	for _, d := range r.JSON(t)["data"].([]any) {
		m := d.(map[string]any)
		out[m["id"].(string)] = m
	}
	return r.Status, out
}

func quarantineEnv(t *testing.T, b sendoncetest.Backend, rule string) (*sendoncetest.Env, string) {
	t.Helper()
	dns := dnstest.Start(t, quarantineZone...)
	env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true, Inbound: true, DNSResolver: dns.Addr()})
	env.OwnDomain(t, "default", "example.com")
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/inboxes", Key: env.AdminKey, IdemKey: "inbox",
		Body: map[string]any{"email_address": "support@example.com", "name": "Support", "quarantine": rule}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create inbox: %d %s", r.Status, r.Body)
	}
	inbox := r.JSON(t)["id"].(string)
	if g := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/inboxes/" + inbox, Key: env.AdminKey}); g.JSON(t)["quarantine"] != rule {
		t.Fatalf("the inbox does not show its rule %q: %s", rule, g.Body)
	}
	return env, inbox
}

// onlyID is the id of the one message the admin's list at path holds.
func onlyID(t *testing.T, env *sendoncetest.Env, path string) string {
	t.Helper()
	_, ms := receivedIDs(t, env, env.AdminKey, path)
	if len(ms) != 1 {
		t.Fatalf("%s: %d messages, want 1: %v", path, len(ms), ms)
	}
	for id := range ms {
		return id
	}
	return ""
}

// TestQuarantine_DMARCFailureIsKeptFromAgents: a message whose From domain
// publishes DMARC p=reject, unsigned and sent from an address its SPF does
// not allow, reaches a dmarc_fail inbox through the real listener (the
// verdicts from a real DNS server) and lands in the quarantine: an agent
// key neither lists it (native API, MCP) nor reads or answers it, and
// may not list the quarantine; an aligned message beside it is in the
// inbox. An admin lists it with ?folder=quarantine; another tenant's admin
// cannot release it; the admin releases it (a repeat changes nothing) and
// then the agent sees it, in a thread.
func TestQuarantine_DMARCFailureIsKeptFromAgents(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env, inbox := quarantineEnv(t, b, "dmarc_fail")
		smtpDeliver(t, env.InboundAddr, "boss@forged.test", "support@example.com", quarantineMail("CEO <boss@forged.test>", "Urgent", "f1@forged.test"))
		smtpDeliver(t, env.InboundAddr, "pal@friend.test", "support@example.com", quarantineMail("Pal <pal@friend.test>", "Hello", "p1@friend.test"))

		bad := onlyID(t, env, "/v1/received?folder=quarantine")
		good := onlyID(t, env, "/v1/received")
		_, q := receivedIDs(t, env, env.AdminKey, "/v1/received?folder=quarantine")
		if m := q[bad]; m["folder"] != "quarantine" || m["thread_id"] != "" || m["authentication"].(map[string]any)["dmarc"] != "fail" {
			t.Fatalf("the quarantined message: %v", m)
		}

		_, agentSecret := env.NewKey(t, app.NewKeyParams{Name: "agent", Agent: true,
			Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
		if _, ms := receivedIDs(t, env, agentSecret, "/v1/received"); len(ms) != 1 || ms[good] == nil {
			t.Fatalf("the agent lists %v, want only %s", ms, good)
		}
		if code, _ := receivedIDs(t, env, agentSecret, "/v1/received?folder=quarantine"); code != http.StatusForbidden {
			t.Fatalf("the agent lists the quarantine: %d, want 403", code)
		}
		for _, path := range []string{"/v1/received/" + bad, "/v1/received/" + bad + "/raw", "/emails/receiving/" + bad} {
			if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: path, Key: agentSecret}); r.Status != http.StatusNotFound {
				t.Errorf("agent GET %s: %d, want 404", path, r.Status)
			}
		}
		reply := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/received/" + bad + "/reply", Key: agentSecret,
			IdemKey: "r1", Body: map[string]any{"text": "done"}})
		if reply.Status != http.StatusNotFound {
			t.Errorf("the agent's reply to the quarantined message: %d %s, want 404", reply.Status, reply.Body)
		}
		_, threads := receivedIDs(t, env, agentSecret, "/inboxes/"+inbox+"/threads")
		if len(threads) != 1 {
			t.Errorf("the agent sees %d threads, want the aligned message's one", len(threads))
		}
		cs := connect(t, env, agentSecret, nil, mcpserver.Config{})
		var list mcpserver.ListMessagesOutput
		callInto(t, cs, "list_messages", map[string]any{}, &list)
		if len(list.Messages) != 1 || list.Messages[0].ID != good {
			t.Fatalf("MCP list_messages: %+v, want only %s", list.Messages, good)
		}
		var read mcpserver.ReadMessageOutput
		if res := callInto(t, cs, "read_message", map[string]any{"id": bad}, &read); !res.IsError || read.Message != nil {
			t.Fatalf("MCP read_message of the quarantined message: %s", wholeResult(res))
		}

		_, otherAdmin := env.NewKey(t, app.NewKeyParams{Name: "other", Tenant: "other",
			Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
		for _, k := range []string{otherAdmin, agentSecret} {
			r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/received/" + bad + "/release", Key: k, IdemKey: "rel-x"})
			if r.Status != http.StatusNotFound {
				t.Fatalf("another tenant's or an agent's release: %d %s, want 404", r.Status, r.Body)
			}
		}

		rel := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/received/" + bad + "/release", Key: env.AdminKey, IdemKey: "rel-1"})
		m := rel.JSON(t)
		if rel.Status != http.StatusOK || m["folder"] != "inbox" || m["thread_id"] == "" {
			t.Fatalf("release: %d %s", rel.Status, rel.Body)
		}
		again := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/received/" + bad + "/release", Key: env.AdminKey, IdemKey: "rel-2"})
		if a := again.JSON(t); again.Status != http.StatusOK || a["folder"] != "inbox" || a["thread_id"] != m["thread_id"] {
			t.Fatalf("a second release: %d %s, want 200 and the same thread", again.Status, again.Body)
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM thread_messages WHERE ref_id = ?`, bad); n != 1 {
			t.Fatalf("the released message is in %d threads, want 1", n)
		}
		if _, ms := receivedIDs(t, env, env.AdminKey, "/v1/received?folder=quarantine"); len(ms) != 0 {
			t.Fatalf("the quarantine after the release: %v", ms)
		}
		if _, ms := receivedIDs(t, env, agentSecret, "/v1/received"); len(ms) != 2 || ms[bad] == nil {
			t.Fatalf("after the release the agent lists %v, want both", ms)
		}
		callInto(t, cs, "list_messages", map[string]any{}, &list)
		if len(list.Messages) != 2 {
			t.Fatalf("MCP list_messages after the release: %+v", list.Messages)
		}
		if res := callInto(t, cs, "read_message", map[string]any{"id": bad}, &read); res.IsError || read.Message == nil {
			t.Fatalf("MCP read_message after the release: %s", wholeResult(res))
		}
	})
}

// TestQuarantine_RuleNoneKeepsDMARCFailuresInTheInbox: under rule none
// the same forged message is in the inbox, flagged as before.
func TestQuarantine_RuleNoneKeepsDMARCFailuresInTheInbox(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env, _ := quarantineEnv(t, b, "none")
		smtpDeliver(t, env.InboundAddr, "boss@forged.test", "support@example.com", quarantineMail("boss@forged.test", "Urgent", "f1@forged.test"))
		id := onlyID(t, env, "/v1/received")
		if _, q := receivedIDs(t, env, env.AdminKey, "/v1/received?folder=quarantine"); len(q) != 0 {
			t.Fatalf("rule none quarantined %v", q)
		}
		_, ms := receivedIDs(t, env, env.AdminKey, "/v1/received")
		if a := ms[id]["authentication"].(map[string]any); a["dmarc_failed"] != true || ms[id]["folder"] != "inbox" {
			t.Fatalf("the message: %v", ms[id])
		}
	})
}

// TestQuarantine_UnknownSenders: under unknown_senders, mail from an
// address the tenant never wrote to nor accepted mail from is
// quarantined; after a send to an address its mail is not; after a
// release, the released sender's next message is not; an admin deletes a
// quarantined message, which then is gone.
func TestQuarantine_UnknownSenders(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env, _ := quarantineEnv(t, b, "unknown_senders")
		smtpDeliver(t, env.InboundAddr, "pal@friend.test", "support@example.com", quarantineMail("Pal <pal@friend.test>", "Hi", "u1@friend.test"))
		first := onlyID(t, env, "/v1/received?folder=quarantine")

		send := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: env.AdminKey, IdemKey: "s1",
			Body: map[string]any{"to": "Buddy <Buddy@friend.test>", "subject": "Hello", "text": "hi"}})
		if send.Status >= 300 {
			t.Fatalf("send: %d %s", send.Status, send.Body)
		}
		smtpDeliver(t, env.InboundAddr, "buddy@friend.test", "support@example.com", quarantineMail("buddy@friend.test", "Re: Hello", "u2@friend.test"))
		if got := onlyID(t, env, "/v1/received"); got == first {
			t.Fatal("the known sender's message is not in the inbox")
		}

		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/received/" + first + "/release", Key: env.AdminKey,
			IdemKey: "rel"}); r.Status != http.StatusOK {
			t.Fatalf("release: %d %s", r.Status, r.Body)
		}
		smtpDeliver(t, env.InboundAddr, "pal@friend.test", "support@example.com", quarantineMail("Pal <pal@friend.test>", "Again", "u3@friend.test"))
		if _, q := receivedIDs(t, env, env.AdminKey, "/v1/received?folder=quarantine"); len(q) != 0 {
			t.Fatalf("a released sender's next message was quarantined: %v", q)
		}

		smtpDeliver(t, env.InboundAddr, "x@stranger.test", "support@example.com", quarantineMail("x@stranger.test", "Buy", "u4@stranger.test"))
		stranger := onlyID(t, env, "/v1/received?folder=quarantine")
		if r := env.Do(t, sendoncetest.Request{Method: "DELETE", Path: "/v1/received/" + stranger, Key: env.AdminKey}); r.Status != http.StatusOK {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/received/" + stranger, Key: env.AdminKey}); r.Status != http.StatusNotFound {
			t.Fatalf("GET after delete: %d, want 404", r.Status)
		}
	})
}
