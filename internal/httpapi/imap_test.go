package httpapi_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/dovecottest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestMailboxIMAP_SealedAndNeverShownBack: a mailbox connected with an
// imap URL shows it without the password, in its answer and its reads;
// the database holds it sealed; bad URLs are a 422 that does not repeat
// the password; an address literal inside the host's networks is refused
// under the default outbound policy.
func TestMailboxIMAP_SealedAndNeverShownBack(t *testing.T) {
	const password = "hunter2-very-secret"
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true, StrictOutbound: true, SecretKey: strings.Repeat("k", 32)})
	do := func(method, path string, body any) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: method, Path: path, Key: env.AdminKey, Body: body})
	}
	r := do("POST", "/v1/mailboxes", map[string]any{"id": "support", "address": "support@example.com",
		"imap": "imaps://support%40example.com:" + password + "@imap.example.com?sent=Sent%20Items"})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	const shown = "imaps://support%40example.com@imap.example.com:993?sent=Sent+Items"
	for _, body := range [][]byte{r.Body, do("GET", "/v1/mailboxes/support", nil).Body, do("GET", "/v1/mailboxes", nil).Body} {
		if strings.Contains(string(body), password) || !strings.Contains(string(body), `"imap":"`+shown+`"`) {
			t.Errorf("mailbox view %s: want imap %q and never the password", body, shown)
		}
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM mailboxes WHERE id = 'support' AND imap IS NOT NULL`); n != 1 {
		t.Fatalf("the imap URL was not stored")
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM mailboxes WHERE id = 'support' AND instr(CAST(imap AS TEXT), 'hunter2') > 0`); n != 0 {
		t.Fatal("the password is stored in the clear despite SENDONCE_SECRET_KEY")
	}
	if got := do("GET", "/v1/mailboxes/default", nil).JSON(t); got["imap"] != nil {
		t.Errorf("an unconnected mailbox shows imap %v, want null", got["imap"])
	}

	// A new password (or other folders) replaces the URL; "" disconnects.
	r = do("PUT", "/v1/mailboxes/support/imap", map[string]any{"imap": "imap://support:new-" + password + "@imap.example.com?sent=Sent"})
	if r.Status != 200 || strings.Contains(string(r.Body), password) || r.JSON(t)["imap"] != "imap://support@imap.example.com:143?sent=Sent" {
		t.Errorf("replace the imap URL: %d %s", r.Status, r.Body)
	}
	if r := do("PUT", "/v1/mailboxes/support/imap", map[string]any{"imap": "imap://support@imap.example.com"}); r.Status != 422 {
		t.Errorf("replace with a URL without password: %d %s, want 422", r.Status, r.Body)
	}
	if r := do("PUT", "/v1/mailboxes/nosuch/imap", map[string]any{"imap": ""}); r.Status != 404 {
		t.Errorf("an unknown mailbox: %d %s, want 404", r.Status, r.Body)
	}
	if r := do("PUT", "/v1/mailboxes/support/imap", map[string]any{"imap": ""}); r.Status != 200 || r.JSON(t)["imap"] != nil {
		t.Errorf("disconnect: %d %s, want imap null", r.Status, r.Body)
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM mailboxes WHERE id = 'support' AND imap IS NULL`); n != 1 {
		t.Errorf("a disconnected mailbox keeps its imap URL")
	}

	for i, bad := range []string{
		"smtp://u:" + password + "@imap.example.com",
		"imaps://u@imap.example.com",
		"imaps://u:" + password + "@imap.example.com?tls=none",
		"imap://u:" + password + "@127.0.0.1:143?tls=none",
		"imap://u:" + password + "@[::1]:143",
		"imap://u:" + password + "@10.1.2.3",
	} {
		r := do("POST", "/v1/mailboxes", map[string]any{"id": "bad" + string(rune('a'+i)), "address": "b@example.com", "imap": bad})
		if r.Status != 422 || r.ErrorCode() != "validation_error" || strings.Contains(string(r.Body), password) {
			t.Errorf("imap %q: %d %s, want a 422 without the password", bad, r.Status, r.Body)
		}
	}
}

// TestMailboxStatus_ChecksIMAPLogin: the status route of a connected
// mailbox logs in to its IMAP server too and says which login failed, as
// a class, on the Mailera and the native route alike.
func TestMailboxStatus_ChecksIMAPLogin(t *testing.T) {
	d := dovecottest.Start(t, dovecottest.Options{})
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true})
	do := func(method, path string, body any) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: method, Path: path, Key: env.AdminKey, Body: body})
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	for _, mb := range []struct {
		id, url    string
		canReceive bool
		imapError  any
	}{
		{"right", "imap://alice:secret@" + d.Addr + "?tls=none", true, nil},
		{"wrong", "imap://alice:not-it@" + d.Addr + "?tls=none", false, "IMAP login failed"},
		{"closed", "imap://alice:secret@" + closedAddr + "?tls=none", false, "IMAP: connection refused"},
	} {
		if r := do("POST", "/v1/mailboxes", map[string]any{"id": mb.id, "address": mb.id + "@example.com", "imap": mb.url}); r.Status != 201 {
			t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
		}
		for _, path := range []string{"/api/public/v1/mailboxes/" + mb.id + "/status", "/v1/mailboxes/" + mb.id + "/status"} {
			st := do("GET", path, nil).JSON(t)
			if st["can_receive"] != mb.canReceive || st["imap_error"] != mb.imapError || st["can_send"] != true || st["error"] != nil {
				t.Errorf("%s: %v, want can_receive %v, imap_error %v and the relay's check apart", path, st, mb.canReceive, mb.imapError)
			}
		}
	}
	// The sync's own state: the server's syncer pauses a mailbox whose
	// login is refused, with the class.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := do("GET", "/v1/mailboxes/wrong/status", nil).JSON(t)
		if st["imap_sync"] == "paused" && st["imap_sync_error"] == "login_failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of a mailbox whose login is refused: %v, want imap_sync paused with login_failed", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := do("GET", "/v1/mailboxes/default/status", nil).JSON(t); st["can_receive"] != nil || st["imap_error"] != nil || st["imap_sync"] != nil {
		t.Errorf("a mailbox that is not connected: %v, want can_receive and imap_error null", st)
	}
}
