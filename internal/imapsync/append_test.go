package imapsync_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dovecottest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestAppend_SentCopyExactlyOnce: a send from a connected mailbox, posted
// twice under one Idempotency-Key, is handed off once and filed once in
// the mailbox's Sent folder (found through SPECIAL-USE, named otherwise
// here), with its own Message-ID. Then the crash window is opened at the
// seam: the owed row is written again, as if the worker had died after the
// APPEND and before removing it; the appender finds the copy by its
// Message-ID and does not append a second one.
func TestAppend_SentCopyExactlyOnce(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		d := dovecottest.Start(t, dovecottest.Options{SentName: "Sent Items"})
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true, AllowNoKey: true})
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, Body: map[string]any{
			"id": "support", "address": "support@example.com", "imap": "imap://alice:secret@" + d.Addr + "?tls=none"}})
		if r.Status != 201 {
			t.Fatalf("connect the mailbox: %d %s", r.Status, r.Body)
		}
		body := map[string]any{"mailbox_id": "support", "to": "ann@example.org", "subject": "Re: your order", "text": "On its way."}
		var id string
		for range 3 {
			r := env.Send(t, "reply-1", body)
			if r.Status != 200 {
				t.Fatalf("send: %d %s", r.Status, r.Body)
			}
			id = r.JSON(t)["id"].(string)
		}
		send := env.WaitStatus(t, id, 20*time.Second, core.StatusSent)
		msgID := send["message_id"].(string)

		sent := waitSent(t, d, "Sent Items", 1)
		if !slices.ContainsFunc(sent, func(s string) bool { return s == msgID || s == "<"+msgID+">" }) {
			t.Fatalf("Sent holds %q, want the send's Message-ID %q", sent, msgID)
		}
		waitRows(t, env, 0)

		// The crash window: the APPEND happened, its row was not removed.
		env.Exec(t, `INSERT INTO imap_appends (tenant, send_id, mailbox_id, next_at, created_at) VALUES ('default', ?, 'support', 0, 0)`, id)
		waitRows(t, env, 0)
		if got := d.MessageIDs(t, "alice", "Sent Items"); len(got) != 1 {
			t.Fatalf("after a repeated append: Sent holds %q, want one copy", got)
		}
		if n := len(env.SMTP.Messages()); n != 1 {
			t.Fatalf("the relay got %d messages, want 1", n)
		}
	})
}

// waitSent waits (bounded) until folder holds n messages and returns
// their Message-IDs.
func waitSent(t *testing.T, d *dovecottest.Dovecot, folder string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := d.MessageIDs(t, "alice", folder)
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("%s holds %q, want %d messages", folder, got, n)
			}
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRows waits (bounded) until n Sent copies are owed.
func waitRows(t *testing.T, env *sendoncetest.Env, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for env.QueryInt(t, `SELECT count(*) FROM imap_appends`) != n {
		if time.Now().After(deadline) {
			t.Fatalf("imap_appends does not reach %d rows", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
