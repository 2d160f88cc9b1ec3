package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDashboard_DraftEditedAndSentOnce: an agent's draft is listed, a
// person edits it in the form and presses "send" twice; an API press
// follows. One send, of the person's words, which every press shows.
func TestDashboard_DraftEditedAndSentOnce(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		_, agent := env.NewKey(t, app.NewKeyParams{Name: "agent", Agent: true, Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}})
		r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/drafts", Key: agent, IdemKey: "d-1",
			Body: map[string]any{"to": "ann@example.com", "subject": "Agent's subject", "text": "Agent's words"}})
		if r.Status != http.StatusOK {
			t.Fatalf("create draft: %d %s", r.Status, r.Body)
		}
		id := r.JSON(t)["id"].(string)

		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		if p := br.get("/ui/drafts"); p.Status != http.StatusOK || !strings.Contains(p.Body, "/ui/drafts/"+id) || !strings.Contains(p.Body, "Agent&#39;s subject") {
			t.Fatalf("the drafts page: %d %s", p.Status, p.Body)
		}
		if p := br.get("/ui/drafts/" + id); p.Status != http.StatusOK || !strings.Contains(p.Body, `action="/ui/drafts/`+id+`/send"`) {
			t.Fatalf("the draft page: %d %s", p.Status, p.Body)
		}
		p := br.post("/ui/drafts/"+id, url.Values{"to": {"ann@example.com, bob@example.com"}, "subject": {"Person's subject"}, "text": {"Person's words"}})
		if p.Status != http.StatusSeeOther {
			t.Fatalf("save: %d %s", p.Status, p.Body)
		}
		first := br.post("/ui/drafts/"+id+"/send", nil)
		second := br.post("/ui/drafts/"+id+"/send", nil)
		if first.Status != http.StatusSeeOther || !strings.HasPrefix(first.Location, "/ui/sends/snd_") || second.Location != first.Location {
			t.Fatalf("two presses: %d %q and %d %q, want one send", first.Status, first.Location, second.Status, second.Location)
		}
		sendID := strings.TrimPrefix(first.Location, "/ui/sends/")
		api := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/drafts/" + id + "/send", Key: agent}).JSON(t)
		if api["id"] != sendID || api["subject"] != "Person's subject" || len(api["to"].([]any)) != 2 {
			t.Errorf("the agent's press after the person's: %v, want send %s with the person's edit", api, sendID)
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM sends WHERE idempotency_key = ?`, app.DraftIdempotencyKey(id)); n != 1 {
			t.Errorf("%d sends of the draft, want 1", n)
		}
		if p := br.get("/ui/drafts/" + id); !strings.Contains(p.Body, "sent as") || strings.Contains(p.Body, `action="/ui/drafts/`+id+`/send"`) {
			t.Errorf("the sent draft's page still offers to send it: %s", p.Body)
		}
		if p := br.post("/ui/drafts/"+id, url.Values{"subject": {"Late"}}); p.Status != http.StatusConflict {
			t.Errorf("editing a sent draft: %d, want 409", p.Status)
		}
	})
}
