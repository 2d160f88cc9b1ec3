package mcpserver_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/mcpserver"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestMCP_ElicitationApprovesHeldSends: a send an agent key's rules hold
// for approval is put to the person at the agent's side when the client
// can elicit. accept: delivered once, however often the model calls
// again; decline: canceled, nothing delivered; a client without the
// capability: pending_approval, as before. Each decision is one audit
// entry of the elicitation route.
func TestMCP_ElicitationApprovesHeldSends(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		_, secret := agentKey(t, env, app.NewKeyParams{RequiresApproval: true})
		var asked atomic.Int32
		answer, wantTo := "accept", "dana@example.com"
		elicit := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			for _, want := range []string{wantTo, "Subject:", "waits for your approval"} {
				if !strings.Contains(req.Params.Message, want) {
					t.Errorf("the question does not show %q: %q", want, req.Params.Message)
				}
			}
			return &mcp.ElicitResult{Action: answer, Content: map[string]any{"approve": true}}, nil
		}}
		cs := connect(t, env, secret, elicit, mcpserver.Config{})

		args := email("dana@example.com", "welcome", "user-11", "2026-12")
		r := call(t, cs, "send_email", args)
		if r.isError || r.Outcome != "approved" || r.AwaitingApproval || r.Send == nil || r.Send.Status == "pending_approval" {
			t.Fatalf("accepted: %+v %s", r.SendOutput, r.text)
		}
		id := r.Send.ID
		env.WaitStatus(t, id, 10*time.Second, core.StatusSent)
		for range 3 { // the model calls again: found, not asked again, not sent again
			if r := call(t, cs, "send_email", args); r.Created || r.Send.ID != id || r.AwaitingApproval {
				t.Fatalf("again: %+v", r.SendOutput)
			}
		}
		if got := delivered(env, "dana@example.com"); got != 1 {
			t.Fatalf("%d messages delivered, want 1", got)
		}
		if n := asked.Load(); n != 1 {
			t.Fatalf("the person was asked %d times, want 1", n)
		}

		answer, wantTo = "decline", "eve@example.com"
		r = call(t, cs, "send_email", email("eve@example.com", "welcome", "user-12", "2026-12"))
		if r.Outcome != "declined" || r.Send == nil || r.Send.Status != "canceled" {
			t.Fatalf("declined: %+v %s", r.SendOutput, r.text)
		}
		time.Sleep(300 * time.Millisecond) // 15 worker polls
		if got := delivered(env, "eve@example.com"); got != 0 {
			t.Fatalf("%d messages delivered after a decline", got)
		}

		// A client that cannot elicit: the send waits, as before.
		plain := connect(t, env, secret, nil, mcpserver.Config{})
		r = call(t, plain, "send_email", email("finn@example.com", "welcome", "user-13", "2026-12"))
		if !r.AwaitingApproval || r.Send.Status != "pending_approval" {
			t.Fatalf("no elicitation: %+v %s", r.SendOutput, r.text)
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM audit_log WHERE route LIKE 'POST /v1/sends/%/elicitation'`); n != 2 {
			t.Fatalf("%d audit entries of elicitation decisions, want 2", n)
		}
	})
}

// TestElicitationRoute_OnlyTheAgentKeyOfTheSend: the route that relays a
// person's answer takes it only from the agent key that made the send;
// an admin key is refused (it approves with /approve) and another agent
// key finds nothing.
func TestElicitationRoute_OnlyTheAgentKeyOfTheSend(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	_, secret := agentKey(t, env, app.NewKeyParams{RequiresApproval: true})
	_, other := agentKey(t, env, app.NewKeyParams{RequiresApproval: true})
	cs := connect(t, env, secret, nil, mcpserver.Config{})
	r := call(t, cs, "send_email", email("gil@example.com", "welcome", "user-14", "2026-12"))
	if !r.AwaitingApproval {
		t.Fatalf("not held: %+v", r.SendOutput)
	}
	path := "/v1/sends/" + r.Send.ID + "/elicitation"
	body := `{"action":"accept"}`
	if resp := env.Do(t, sendoncetest.Request{Method: "POST", Path: path, Key: env.AdminKey, Body: body, IdemKey: "k1"}); resp.Status != 403 {
		t.Fatalf("admin key: %d %s", resp.Status, resp.Body)
	}
	if resp := env.Do(t, sendoncetest.Request{Method: "POST", Path: path, Key: other, Body: body, IdemKey: "k2"}); resp.Status != 404 {
		t.Fatalf("another agent key: %d %s", resp.Status, resp.Body)
	}
	if resp := env.Do(t, sendoncetest.Request{Method: "POST", Path: path, Key: secret, Body: `{"action":"maybe"}`, IdemKey: "k3"}); resp.Status != 422 {
		t.Fatalf("unknown action: %d %s", resp.Status, resp.Body)
	}
	if resp := env.Do(t, sendoncetest.Request{Method: "POST", Path: path, Key: secret, Body: body, IdemKey: "k4"}); resp.Status != 200 || !strings.Contains(string(resp.Body), `"status":"queued"`) {
		t.Fatalf("its own agent key: %d %s", resp.Status, resp.Body)
	}
	if resp := env.Do(t, sendoncetest.Request{Method: "POST", Path: path, Key: secret, Body: body, IdemKey: "k5"}); resp.Status != 409 {
		t.Fatalf("decided twice: %d %s", resp.Status, resp.Body)
	}
}
