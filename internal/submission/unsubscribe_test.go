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
// send made over HTTP does; the same key's message to two recipients is
// refused (one copy per recipient is not built), and a client's own
// List-Unsubscribe is refused.
func TestSubmission_BulkMessageGetsOneClickHeaders(t *testing.T) {
	env, addr := startEnv(t, sendoncetest.SQLite)
	_, key := env.NewKey(t, app.NewKeyParams{Name: "news", Scopes: []core.Scope{core.ScopeSend}, DefaultStream: core.StreamBulk})
	c := dial(t, addr, key)
	from := "sender@example.com" // the default mailbox's address (sendoncetest)
	if _, err := submit(c, from, []string{"ann@example.com", "bob@example.com"}, mail(newMsgID(), "x")); code(err) < 500 {
		t.Errorf("a bulk message to two recipients: %v, want a 5xx refusal", err)
	}
	if _, err := submit(c, from, []string{"ann@example.com"}, mail(newMsgID(), "x", "List-Unsubscribe: <https://evil.example/u>")); code(err) < 500 {
		t.Errorf("a client's own List-Unsubscribe: %v, want a 5xx refusal", err)
	}
	text, err := submit(c, from, []string{"ann@example.com"}, mail(newMsgID(), "news"))
	if err != nil {
		t.Fatalf("a bulk message to one recipient: %v", err)
	}
	env.WaitStatus(t, sendID(t, text), 20*time.Second, core.StatusSent)
	var got []byte
	for _, m := range env.SMTP.Messages() {
		if slices.Contains(m.To, "ann@example.com") {
			got = m.Data
		}
	}
	m, err := netmail.ReadMessage(bytes.NewReader(got))
	if err != nil {
		t.Fatalf("the relayed message: %v", err)
	}
	if list := m.Header.Get("List-Unsubscribe"); !strings.Contains(list, "/u/") || m.Header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
		t.Errorf("the relayed bulk message lacks the one-click headers: List-Unsubscribe %q, List-Unsubscribe-Post %q", list, m.Header.Get("List-Unsubscribe-Post"))
	}
}
