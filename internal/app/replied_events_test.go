package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestReceive_OneRepliedEntryPerSend: 30 replies from strangers to one
// send leave one replied entry in its history, naming the thread that
// holds them all, not one entry each.
func TestReceive_OneRepliedEntryPerSend(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		inbox := env.NewInbox(t, "default", "news@example.com", "News")
		sent := env.Send(t, "news", map[string]any{"from": "news@example.com", "to": "list@partner.test",
			"subject": "Newsletter", "text": "Hello.", "mailbox_id": inbox.ID}).JSON(t)
		const replies = 30
		var thread string
		for i := range replies {
			raw := fmt.Sprintf("From: anon%d@stranger.test\r\nTo: news@example.com\r\nSubject: Re: Newsletter\r\n"+
				"Message-ID: <r%d@stranger.test>\r\nIn-Reply-To: %s\r\n\r\nunsubscribe\r\n", i, i, sent["message_id"])
			rcv := env.Receive(t, inbox, raw)
			thread = rcv.ThreadID
		}
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends/" + sent["id"].(string), Key: env.AdminKey})
		if r.Status != http.StatusOK {
			t.Fatalf("read the send: %d %s", r.Status, r.Body)
		}
		var got []map[string]any
		for _, e := range r.JSON(t)["events"].([]any) {
			if e := e.(map[string]any); e["type"] == core.EventReplied {
				got = append(got, e)
			}
		}
		if len(got) != 1 {
			t.Fatalf("%d replies left %d replied entries, want 1", replies, len(got))
		}
		if d, _ := got[0]["detail"].(string); !strings.Contains(d, thread) {
			t.Fatalf("the replied entry does not name the thread %s: %q", thread, d)
		}
		if n := env.QueryInt(t, "SELECT count(*) FROM received_messages WHERE send_id = ?", sent["id"]); n != replies {
			t.Fatalf("%d replies linked to the send, want %d", n, replies)
		}
	})
}
