package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// bigBody is one body of a large received message: 512 KiB of a marker no
// list may carry.
var bigBody = strings.Repeat("BODYBYTES ", 512<<10/10)

// bigThread receives n large messages (512 KiB of text and of HTML each)
// into one thread of a new inbox; it returns the inbox and the thread.
func bigThread(t *testing.T, env *sendoncetest.Env, n int) (inbox, thread string) {
	t.Helper()
	svc, ctx := env.Server.Service, context.Background()
	m := env.NewInbox(t, "default", "desk@big.test", "Desk")
	for i := range n {
		refs := ""
		if i > 0 {
			refs = "In-Reply-To: <big0@stranger.test>\r\nReferences: <big0@stranger.test>\r\n"
		}
		raw := fmt.Sprintf("From: stranger%d@stranger.test\r\nTo: desk@big.test\r\nSubject: Re: Big\r\nMessage-ID: <big%d@stranger.test>\r\n%s"+
			"MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\n%s\r\n"+
			"--B\r\nContent-Type: text/html\r\n\r\n<p>%s</p>\r\n--B--\r\n", i, i, refs, bigBody, bigBody)
		r, err := svc.Receive(ctx, app.Incoming{Tenant: "default", MailboxID: m.ID, Source: "smtp", MailFrom: "s@stranger.test",
			RcptTo: []string{"desk@big.test"}, Raw: []byte(raw)})
		if err != nil {
			t.Fatal(err)
		}
		if thread != "" && r.ThreadID != thread {
			t.Fatalf("message %d is in thread %s, not %s", i, r.ThreadID, thread)
		}
		thread = r.ThreadID
	}
	return m.ID, thread
}

// TestReceived_ListsAndThreadsCarryNoBodies: a thread of large messages is
// listed and read with previews, never the bodies, a page at a time
// (limit at most 100); one message's read has its bodies. The service's
// list (behind GET /v1/received and MCP's list_messages) reads no bodies.
func TestReceived_ListsAndThreadsCarryNoBodies(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		inbox, thread := bigThread(t, env, 5)
		get := func(path string, want int) map[string]any {
			t.Helper()
			r := env.Do(t, sendoncetest.Request{Method: "GET", Path: path, Key: env.AdminKey})
			if r.Status != want {
				t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
			}
			// A body is 512 KiB; a page of previews is a few KiB.
			if want == http.StatusOK && len(r.Body) > 64<<10 && !strings.Contains(path, "/emails/rcv_") {
				t.Fatalf("GET %s answered %d bytes: it carries bodies", path, len(r.Body))
			}
			var m map[string]any
			_ = json.Unmarshal(r.Body, &m)
			return m
		}

		ms, _, err := env.Server.Service.ListReceived(context.Background(), &core.APIKey{Tenant: "default"}, core.ReceivedFilter{Limit: 100})
		if err != nil || len(ms) != 5 {
			t.Fatalf("list: %d %v", len(ms), err)
		}
		for _, m := range ms {
			if m.Text != "" || m.HTML != "" || len(m.Headers) != 0 || !strings.HasPrefix(m.Preview, "BODYBYTES") || len([]rune(m.Preview)) > app.PreviewRunes {
				t.Fatalf("a listed message holds %d bytes of text, %d of HTML, %d headers; preview %q", len(m.Text), len(m.HTML), len(m.Headers), m.Preview)
			}
		}
		for _, d := range get("/v1/received?limit=100", 200)["data"].([]any) {
			if p, _ := d.(map[string]any)["preview"].(string); !strings.HasPrefix(p, "BODYBYTES") {
				t.Fatalf("a listed message has no preview: %v", d)
			}
		}

		// The native thread read, two at a time, following next_cursor.
		var seen []string
		path := "/v1/threads/" + thread + "?limit=2"
		for range 5 {
			page := get(path, 200)
			msgs := page["messages"].([]any)
			if len(msgs) > 2 {
				t.Fatalf("a page of limit 2 has %d messages", len(msgs))
			}
			for _, m := range msgs {
				mm := m.(map[string]any)
				if mm["text"] != nil || mm["html"] != nil || !strings.HasPrefix(mm["preview"].(string), "BODYBYTES") {
					t.Fatalf("a thread page's message: text %T html %T preview %v", mm["text"], mm["html"], mm["preview"])
				}
				seen = append(seen, mm["id"].(string))
			}
			next, _ := page["next_cursor"].(string)
			if next == "" {
				break
			}
			path = "/v1/threads/" + thread + "?limit=2&cursor=" + next
		}
		if len(seen) != 5 {
			t.Fatalf("the pages held %d messages, want 5: %v", len(seen), seen)
		}
		get("/v1/threads/"+thread+"?limit=101", http.StatusUnprocessableEntity)

		// Resend's thread emails, paged; one email read has its bodies.
		emails := "/inboxes/" + inbox + "/threads/" + thread + "/emails"
		page := get(emails+"?limit=3", 200)
		if page["has_more"] != true || len(page["data"].([]any)) != 3 {
			t.Fatalf("Resend's thread emails, limit 3: has_more %v, %d emails", page["has_more"], len(page["data"].([]any)))
		}
		one := get(emails+"/"+seen[0], 200)
		if text, _ := one["text"].(string); len(text) < len(bigBody) {
			t.Fatalf("one email's read has %d bytes of text", len(text))
		}
	})
}
