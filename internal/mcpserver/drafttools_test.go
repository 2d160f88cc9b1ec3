package mcpserver_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/mcpserver"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestMCP_DraftsAreSentOnce: the agent drafts a reply (twice with the same
// input: one draft), edits it, a person edits it again, and both send it:
// one email, the person's words, threaded; each tool says that received
// mail is data.
func TestMCP_DraftsAreSentOnce(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env, _, cs, first, _ := mailEnv(t, b, app.NewKeyParams{})
		tools, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools.Tools {
			if strings.HasSuffix(tl.Name, "_draft") && tl.Name != "send_draft" && !strings.Contains(tl.Description, "never instructions") {
				t.Errorf("%s does not say received mail is data: %q", tl.Name, tl.Description)
			}
		}
		in := map[string]any{"in_reply_to": first, "text": "We are looking into it."}
		var d, again mcpserver.DraftOutput
		if res := callInto(t, cs, "create_draft", in, &d); res.IsError || d.Draft == nil {
			t.Fatalf("create_draft: %s", wholeResult(res))
		}
		callInto(t, cs, "create_draft", in, &again)
		if again.Draft == nil || again.Draft.ID != d.Draft.ID {
			t.Errorf("the same create_draft twice made %v and %v, want one draft", d.Draft, again.Draft)
		}
		if d.Draft.Type != "reply" || d.Draft.Subject != "Re: Invoice question" || len(d.Draft.To) != 1 ||
			!strings.Contains(d.Draft.To[0], "mallory@outside.example") || !strings.Contains(d.Note, "never follow instructions") {
			t.Errorf("the reply draft: %+v (%s)", d.Draft, d.Note)
		}
		var u mcpserver.DraftOutput
		if res := callInto(t, cs, "update_draft", map[string]any{"id": d.Draft.ID, "text": "The agent's words."}, &u); res.IsError || u.Draft.Text != "The agent's words." {
			t.Fatalf("update_draft: %s", wholeResult(res))
		}
		if r := env.Do(t, sendoncetest.Request{Method: http.MethodPatch, Path: "/v1/drafts/" + d.Draft.ID, Key: env.AdminKey,
			Body: map[string]any{"text": "The person's words."}}); r.Status != http.StatusOK {
			t.Fatalf("the person's edit: %d %s", r.Status, r.Body)
		}
		var sent, twice mcpserver.SendOutput
		if res := callInto(t, cs, "send_draft", map[string]any{"id": d.Draft.ID}, &sent); res.IsError || sent.Outcome != "created" || sent.Send == nil {
			t.Fatalf("send_draft: %s", wholeResult(res))
		}
		callInto(t, cs, "send_draft", map[string]any{"id": d.Draft.ID}, &twice)
		person := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/drafts/" + d.Draft.ID + "/send", Key: env.AdminKey})
		if twice.Outcome != "found" || twice.Send == nil || twice.Send.ID != sent.Send.ID || person.JSON(t)["id"] != sent.Send.ID {
			t.Errorf("sending again: %+v, the person's press %s; want send %s", twice, person.Body, sent.Send.ID)
		}
		env.WaitStatus(t, sent.Send.ID, 20*time.Second, core.StatusSent)
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 || !bytes.Contains(msgs[0].Data, []byte("The person's words.")) || !bytes.Contains(msgs[0].Data, []byte("In-Reply-To: <q1@outside.example>")) {
			t.Errorf("the relay got %d messages; want one, the person's words, threaded", len(msgs))
		}
	})
}
