package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

func newClient(t *testing.T, url, key string, mod func(*client.Config)) *client.Client {
	t.Helper()
	return sendoncetest.NewClient(t, client.Config{BaseURL: url, APIKey: key, Timeout: 5 * time.Second, MaxAttempts: 4,
		BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond, MaxElapsed: 20 * time.Second}, mod)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sendsWithKey counts the server's sends carrying key.
func sendsWithKey(t *testing.T, c *client.Client, key string) []client.Send {
	t.Helper()
	l, err := c.ListSends(ctxT(t), &client.ListSendsParams{IdempotencyKey: key, Limit: 100})
	if err != nil {
		t.Fatalf("list sends of %s: %v", key, err)
	}
	return l.Data
}

// waitSent waits until the send is sent (bounded) and returns it.
func waitSent(t *testing.T, c *client.Client, id string) *client.Send {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, err := c.GetSend(ctxT(t), id)
		if err != nil {
			t.Fatalf("get send %s: %v", id, err)
		}
		if s.Status == client.StatusSent {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("send %s still %s", id, s.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestClient_AgainstARealServer(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	c := newClient(t, env.URL, env.AdminKey, nil)
	ctx := ctxT(t)

	req := &client.SendRequest{To: []string{"Ada <ada@example.com>"}, Subject: "Welcome", Text: "Hello Ada!", Tags: map[string]string{"user": "42"}}
	first, err := c.Send(ctx, req, &client.SendOptions{IdempotencyKey: "welcome-user-42"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed || first.Status != client.StatusQueued || first.IdempotencyKey != "welcome-user-42" || first.Tags["user"] != "42" {
		t.Fatalf("first send: %+v", first)
	}
	again, err := c.Send(ctx, req, &client.SendOptions{IdempotencyKey: "welcome-user-42"})
	if err != nil || !again.Replayed || again.ID != first.ID || string(again.Raw) != string(first.Raw) {
		t.Fatalf("retry: %+v, %v; want a byte-identical replay of %s", again, err, first.Raw)
	}

	changed := *req
	changed.Subject = "Welcome!"
	_, err = c.Send(ctx, &changed, &client.SendOptions{IdempotencyKey: "welcome-user-42"})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 422 || e.Code != client.CodeKeyReused || !client.IsRejected(err) {
		t.Fatalf("same key, changed body: %v; want 422 idempotency_key_reused", err)
	}

	if first.Stream != client.StreamTransactional {
		t.Errorf("a send without a stream is in stream %q, want transactional", first.Stream)
	}
	bulk, err := c.Send(ctx, &client.SendRequest{To: []string{"reader@example.org"}, Subject: "News", Text: "x", Stream: client.StreamBulk}, nil)
	if err != nil || bulk.Stream != client.StreamBulk {
		t.Fatalf("a bulk send: %+v, %v", bulk, err)
	}

	_, err = c.Send(ctx, &client.SendRequest{To: []string{"not an address"}, Subject: "x", Text: "x"}, nil)
	if !errors.As(err, &e) || e.Status != 422 || e.Code != client.CodeValidation || e.Param != "to" {
		t.Fatalf("bad address: %v; want 422 validation_error param to", err)
	}

	got := waitSent(t, c, first.ID)
	if len(got.Events) == 0 || got.SentAt == nil || got.MessageID == "" {
		t.Fatalf("GetSend: %+v", got)
	}
	found, ok, err := c.SendByKey(ctx, "welcome-user-42")
	if err != nil || !ok || found.ID != first.ID {
		t.Fatalf("SendByKey: %+v %v %v", found, ok, err)
	}
	if _, ok, err := c.SendByKey(ctx, "never-used"); err != nil || ok {
		t.Fatalf("SendByKey(never-used) = %v, %v; want not found", ok, err)
	}
	if l, err := c.ListSends(ctx, &client.ListSendsParams{Recipient: "ADA@example.com"}); err != nil || len(l.Data) != 1 || l.Data[0].ID != first.ID {
		t.Fatalf("ListSends by recipient: %+v %v; want the one send to Ada", l, err)
	}
	if l, err := c.ListSends(ctx, &client.ListSendsParams{Recipient: "bob@example.com"}); err != nil || len(l.Data) != 0 {
		t.Fatalf("ListSends by another recipient: %+v %v; want none", l, err)
	}
	if _, err := c.GetSend(ctx, "snd_nope"); !client.IsNotFound(err) {
		t.Fatalf("GetSend(unknown id) = %v; want 404", err)
	}

	// Templates.
	tp, err := c.PutTemplate(ctx, "welcome", &client.TemplateParams{Subject: "Hi {{.name}}", Text: "Hello {{.name}}", HTML: "<p>Hello {{.name}}</p>"})
	if err != nil || !tp.Created {
		t.Fatalf("PutTemplate: %+v %v", tp, err)
	}
	if tp, err = c.PutTemplate(ctx, "welcome", &client.TemplateParams{Subject: "Hi {{.name}}!", Text: "Hello {{.name}}"}); err != nil || tp.Created {
		t.Fatalf("PutTemplate again: %+v %v", tp, err)
	}
	if tp, err = c.GetTemplate(ctx, "welcome"); err != nil || tp.Subject != "Hi {{.name}}!" {
		t.Fatalf("GetTemplate: %+v %v", tp, err)
	}
	if ts, err := c.ListTemplates(ctx); err != nil || len(ts) != 1 {
		t.Fatalf("ListTemplates: %v %v", ts, err)
	}
	ts, err := c.Send(ctx, &client.SendRequest{To: []string{"bob@example.com"}, TemplateID: "welcome", Variables: map[string]any{"name": "Bob"}}, nil)
	if err != nil || ts.Subject != "Hi Bob!" || ts.TemplateID != "welcome" {
		t.Fatalf("templated send: %+v %v", ts, err)
	}
	if _, err = c.Send(ctx, &client.SendRequest{To: []string{"bob@example.com"}, TemplateID: "welcome"}, nil); client.ErrorCode(err) != client.CodeTemplateMissingVar {
		t.Fatalf("missing variable: %v", err)
	}
	if err := c.DeleteTemplate(ctx, "welcome"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTemplate(ctx, "welcome"); !client.IsNotFound(err) {
		t.Fatalf("deleted template: %v", err)
	}

	// Approval.
	_, apprKey := env.NewKey(t, app.NewKeyParams{Name: "appr", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}, RequiresApproval: true})
	ac := newClient(t, env.URL, apprKey, nil)
	pend, err := ac.Send(ctx, &client.SendRequest{To: []string{"c@example.com"}, Subject: "x", Text: "y"}, nil)
	if err != nil || pend.Status != client.StatusPendingApproval {
		t.Fatalf("approval-key send: %+v %v", pend, err)
	}
	if _, err := ac.Approve(ctx, pend.ID, nil); client.ErrorCode(err) != client.CodeForbidden {
		t.Fatalf("approve without admin: %v; want 403", err)
	}
	ap, err := c.Approve(ctx, pend.ID, nil)
	if err != nil || ap.Status != client.StatusQueued {
		t.Fatalf("Approve: %+v %v", ap, err)
	}
	if _, err := c.Reject(ctx, pend.ID, nil); client.ErrorCode(err) != client.CodeInvalidState || !client.IsRejected(err) {
		t.Fatalf("Reject after approve: %v; want 409 invalid_state", err)
	}

	// Reconcile a send whose handoff was interrupted after DATA.
	env.SMTP.SetBehaviour(smtptest.Behaviour{HangUpAfterData: true})
	unk, err := c.Send(ctx, &client.SendRequest{To: []string{"d@example.com"}, Subject: "x", Text: "y"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	env.WaitStatus(t, unk.ID, 15*time.Second, core.StatusUnknown)
	env.SMTP.SetBehaviour(smtptest.Behaviour{})
	rec, err := c.Reconcile(ctx, unk.ID, client.OutcomeSent, nil)
	if err != nil || rec.Status != client.StatusSent {
		t.Fatalf("Reconcile: %+v %v", rec, err)
	}
}

func TestClient_RequiresKeyScopes(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	_, readOnly := env.NewKey(t, app.NewKeyParams{Name: "ro", Scopes: []core.Scope{core.ScopeRead}})
	_, err := newClient(t, env.URL, readOnly, nil).Send(ctxT(t), &client.SendRequest{To: []string{"a@example.com"}, Subject: "x", Text: "y"}, nil)
	if client.ErrorCode(err) != client.CodeForbidden || !client.IsRejected(err) {
		t.Fatalf("send with a read key: %v; want 403", err)
	}
	_, err = newClient(t, env.URL, "so_wrong", nil).GetSend(ctxT(t), "x")
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 401 {
		t.Fatalf("bad secret: %v; want 401", err)
	}
}

// TestClient_Faults puts the fault proxy between the client and a real
// server and makes the first POST of every key fail in one way. Every
// logical send must end with exactly one send on the server and one message
// at the relay.
func TestClient_Faults(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	admin := newClient(t, env.URL, env.AdminKey, nil)
	const tasks = 5
	for _, fault := range []faultproxy.Fault{faultproxy.Drop, faultproxy.Delay, faultproxy.Unavailable,
		faultproxy.UnavailableAfter, faultproxy.Reset, faultproxy.ResetAfter} {
		t.Run(fault.String(), func(t *testing.T) {
			px := faultproxy.Start(t, faultproxy.Options{Upstream: env.URL, Plan: faultproxy.FirstPerKey("/v1/send", fault, 1), Delay: 2500 * time.Millisecond})
			c := newClient(t, px.URL, env.AdminKey, func(c *client.Config) { c.Timeout = time.Second })
			var ids []string
			sends, replays := 0, 0
			for i := range tasks {
				req := &client.SendRequest{To: []string{fmt.Sprintf("user%d@example.com", i)}, Subject: "fault " + fault.String(), Text: "once"}
				s, err := c.Send(ctxT(t), req, nil) // the client makes the key
				if err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				ids = append(ids, s.ID)
				if s.Replayed {
					replays++
				} else if fault.Forwards() {
					t.Errorf("send %d: the server processed the first attempt, but the retry was not a replay", i)
				}
				n := len(sendsWithKey(t, admin, s.IdempotencyKey))
				if n != 1 {
					t.Errorf("key %s has %d sends", s.IdempotencyKey, n)
				}
				sends += n
			}
			var mids []string
			for _, id := range ids {
				mids = append(mids, strings.Trim(waitSent(t, admin, id).MessageID, "<>"))
			}
			counts := env.SMTP.MessageIDCounts()
			dups := 0
			for _, mid := range mids {
				if n := counts[mid]; n != 1 {
					t.Errorf("message %s reached the relay %d times", mid, n)
					dups += max(n-1, 0)
				}
			}
			posts := px.Count("POST", "/v1/send")
			if posts <= tasks {
				t.Errorf("%d POSTs for %d sends: the fault did not force retries", posts, tasks)
			}
			t.Logf("MEASURED client/%s: tasks=%d posts=%d injected=%d replays=%d sends=%d duplicates=%d", fault, tasks, posts,
				px.Count("POST", "/v1/send", fault), replays, sends, dups)
		})
	}
}
