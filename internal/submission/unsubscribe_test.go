package submission_test

import (
	"bytes"
	netmail "net/mail"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestSubmission_BulkMessageGetsOneClickHeaders: a message submitted over
// SMTP with a key whose mail is bulk reaches the relay with the one-click
// unsubscribe headers, added in front of the client's own, as a bulk
// send made over HTTP does; one to two recipients goes out as one copy
// each (its own envelope recipient, its own link), and a client's own
// List-Unsubscribe is refused.
func TestSubmission_BulkMessageGetsOneClickHeaders(t *testing.T) {
	env, addr := startEnv(t, sendoncetest.SQLite)
	_, key := env.NewKey(t, app.NewKeyParams{Name: "news", Scopes: []core.Scope{core.ScopeSend}, DefaultStream: core.StreamBulk})
	c := dial(t, addr, key)
	from := "sender@example.com" // the default mailbox's address (sendoncetest)
	if _, err := submit(c, from, []string{"ann@example.com"}, mail(newMsgID(), "x", "List-Unsubscribe: <https://evil.example/u>")); code(err) < 500 {
		t.Errorf("a client's own List-Unsubscribe: %v, want a 5xx refusal", err)
	}
	rcpts := []string{"ann@example.com", "bob@example.com"}
	text, err := submit(c, from, rcpts, mail(newMsgID(), "news"))
	if err != nil {
		t.Fatalf("a bulk message to two recipients: %v", err)
	}
	env.WaitStatus(t, sendID(t, text), 20*time.Second, core.StatusSent)
	links := map[string]bool{}
	for _, rcpt := range rcpts {
		var got [][]byte
		for _, m := range env.SMTP.Messages() {
			if slices.Contains(m.To, rcpt) {
				if len(m.To) != 1 {
					t.Errorf("a copy went to %v, want %s alone", m.To, rcpt)
				}
				got = append(got, m.Data)
			}
		}
		if len(got) != 1 {
			t.Fatalf("%s got %d messages, want its one copy", rcpt, len(got))
		}
		m, err := netmail.ReadMessage(bytes.NewReader(got[0]))
		if err != nil {
			t.Fatalf("the relayed message: %v", err)
		}
		list := m.Header.Get("List-Unsubscribe")
		if !strings.Contains(list, "/u/") || m.Header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
			t.Errorf("%s: the relayed bulk message lacks the one-click headers: List-Unsubscribe %q, List-Unsubscribe-Post %q", rcpt, list, m.Header.Get("List-Unsubscribe-Post"))
		}
		links[list] = true
	}
	if len(links) != len(rcpts) {
		t.Errorf("%d distinct links among %d copies, want one each", len(links), len(rcpts))
	}
}
