package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

const draftQuestion = "From: Ann <ann@outside.example>\r\nTo: support@example.com\r\nCc: bob@outside.example\r\n" +
	"Subject: Question\r\nMessage-ID: <q2@outside.example>\r\nReferences: <q1@outside.example>\r\n\r\nHello?\r\n"

// draftEnv starts sendonce on b with a recording SMTP server and an inbox
// (support@example.com) that received one message from ann@outside.example.
func draftEnv(t *testing.T, b sendoncetest.Backend) (*sendoncetest.Env, *core.Mailbox, app.Received) {
	t.Helper()
	env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true})
	inbox := env.NewInbox(t, "default", "support@example.com", "Support")
	rcv, err := env.Server.Service.Receive(context.Background(), app.Incoming{Tenant: "default", MailboxID: inbox.ID, Source: "smtp", Raw: []byte(draftQuestion)})
	if err != nil {
		t.Fatal(err)
	}
	return env, inbox, rcv
}

// createDraft makes a draft with key and returns its JSON.
func createDraft(t *testing.T, env *sendoncetest.Env, key, idem string, body map[string]any) map[string]any {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/drafts", Key: key, IdemKey: idem, Body: body})
	if r.Status != http.StatusOK {
		t.Fatalf("create draft: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)
}

func sendDraft(env *sendoncetest.Env, key, id string) (*sendoncetest.Response, error) {
	return env.TryDo(sendoncetest.Request{Method: http.MethodPost, Path: "/v1/drafts/" + id + "/send", Key: key})
}

// sendsUnder counts the sends stored under an Idempotency-Key.
func sendsUnder(t *testing.T, env *sendoncetest.Env, idem string) int {
	t.Helper()
	return env.QueryInt(t, `SELECT count(*) FROM sends WHERE idempotency_key = ?`, idem)
}

// Four presses of "send" at once are one email: every one answers 200
// with the same send id (the later ones wait for the first instead of
// answering 409), and one send exists under the draft's key.
func TestDrafts_ConcurrentSendsAreOneSend(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		d := createDraft(t, env, env.AdminKey, "d-1", map[string]any{"to": "ann@example.com", "subject": "Hi", "text": "Hello"})
		id := d["id"].(string)
		const presses = 4
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			ids   = make([]string, presses)
			errs  = make(chan error, presses)
		)
		for i := range presses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := sendDraft(env, env.AdminKey, id)
				if err != nil {
					errs <- err
					return
				}
				if r.Status != http.StatusOK {
					t.Errorf("press %d: %d %s, want 200", i, r.Status, r.Body)
					return
				}
				v, err := r.TryJSON()
				if err != nil {
					errs <- err
					return
				}
				ids[i], _ = v["id"].(string)
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i := range ids {
			if ids[i] == "" || ids[i] != ids[0] {
				t.Errorf("press %d answered send %q, press 0 %q: want one send id", i, ids[i], ids[0])
			}
		}
		if n := sendsUnder(t, env, app.DraftIdempotencyKey(id)); n != 1 {
			t.Errorf("%d sends under the draft's key, want 1", n)
		}
		got := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/drafts/" + id, Key: env.AdminKey}).JSON(t)
		if got["status"] != "sent" || got["send_id"] != ids[0] {
			t.Errorf("the draft after sending: %v, want sent as %s", got, ids[0])
		}
	})
}

// A retry after the send was delivered still gets the first answer byte
// for byte (status queued or sending, as POST /v1/send's replays do), not
// the send as it is by then. The relay holds its answer until the first
// press is answered, so the send cannot be sent before it.
func TestDrafts_RetryAfterDeliveryReplaysTheFirstAnswer(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, NoReplayCache: true}, func(t *testing.T, env *sendoncetest.Env) {
		hold := make(chan struct{})
		env.SMTP.SetBehaviour(smtptest.Behaviour{HoldData: hold})
		id := createDraft(t, env, env.AdminKey, "d-after", map[string]any{"to": "ann@example.com", "subject": "Hi", "text": "Hello"})["id"].(string)
		first, err := sendDraft(env, env.AdminKey, id)
		close(hold)
		if err != nil || first.Status != http.StatusOK {
			t.Fatalf("send: %v %v", err, first)
		}
		sendID := first.JSON(t)["id"].(string)
		if sent := env.WaitStatus(t, sendID, deliveryTimeout, core.StatusSent); sent["status"] == first.JSON(t)["status"] {
			t.Fatalf("the send did not change after the first answer (%v): the test proves nothing", sent["status"])
		}
		again, err := sendDraft(env, env.AdminKey, id)
		if err != nil {
			t.Fatal(err)
		}
		if again.Status != http.StatusOK || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the retry after delivery: %d %s (replayed %q), want the first answer: %s",
				again.Status, again.Body, again.Header.Get("Idempotent-Replayed"), first.Body)
		}
		if n := len(env.SMTP.Messages()); n != 1 {
			t.Errorf("the relay got %d messages, want 1", n)
		}
	})
}

// A client whose answer was lost retries: it gets the same send, replayed,
// and still does after the key's record is gone (purged after its TTL):
// the draft remembers the send it became.
func TestDrafts_LostAnswerRetriedIsTheSameSend(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true, NoReplayCache: true}, func(t *testing.T, env *sendoncetest.Env) {
		id := createDraft(t, env, env.AdminKey, "d-1", map[string]any{"to": "ann@example.com", "subject": "Hi", "text": "Hello"})["id"].(string)
		first, err := sendDraft(env, env.AdminKey, id)
		if err != nil || first.Status != http.StatusOK {
			t.Fatalf("send: %v %v", err, first)
		}
		again, err := sendDraft(env, env.AdminKey, id)
		if err != nil {
			t.Fatal(err)
		}
		if again.Status != http.StatusOK || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the retry: %d %s (replayed %q), want the first answer replayed: %s",
				again.Status, again.Body, again.Header.Get("Idempotent-Replayed"), first.Body)
		}
		env.ForgetIdempotencyKeys(t)
		late, err := sendDraft(env, env.AdminKey, id)
		if err != nil {
			t.Fatal(err)
		}
		if late.Status != http.StatusOK || late.JSON(t)["id"] != first.JSON(t)["id"] {
			t.Errorf("a retry after the key was purged: %d %s, want send %v", late.Status, late.Body, first.JSON(t)["id"])
		}
		if n := sendsUnder(t, env, app.DraftIdempotencyKey(id)); n != 1 {
			t.Errorf("%d sends under the draft's key, want 1", n)
		}
	})
}

// An edit after creation is what is sent, under the key fixed at
// creation; once sent, the draft can no longer be edited (409) —
// deleted, it keeps its send and can make no other — and a
// draft that cannot be sent yet (no recipient) answers 422
// without using its key up.
func TestDrafts_EditThenSendUnderTheOriginalKey(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		d := createDraft(t, env, env.AdminKey, "d-1", map[string]any{"subject": "First", "text": "one"})
		id, key := d["id"].(string), d["idempotency_key"].(string)
		if key != app.DraftIdempotencyKey(id) {
			t.Fatalf("idempotency_key %q, want %q", key, app.DraftIdempotencyKey(id))
		}
		if r, _ := sendDraft(env, env.AdminKey, id); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("sending a draft without recipients: %d %s, want 422", r.Status, r.Body)
		}
		p := env.Do(t, sendoncetest.Request{Method: http.MethodPatch, Path: "/v1/drafts/" + id, Key: env.AdminKey,
			Body: map[string]any{"to": []string{"ann@example.com"}, "subject": "Edited", "text": "two"}})
		if p.Status != http.StatusOK || p.JSON(t)["subject"] != "Edited" {
			t.Fatalf("patch: %d %s", p.Status, p.Body)
		}
		r, _ := sendDraft(env, env.AdminKey, id)
		if r.Status != http.StatusOK {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		s := r.JSON(t)
		if s["subject"] != "Edited" || s["idempotency_key"] != key {
			t.Errorf("the send: subject %v under %v, want Edited under %s", s["subject"], s["idempotency_key"], key)
		}
		env.WaitStatus(t, s["id"].(string), 20*time.Second, core.StatusSent)
		if raw := env.SMTP.Messages()[0].Data; !bytes.Contains(raw, []byte("Subject: Edited")) || !bytes.Contains(raw, []byte("two")) {
			t.Errorf("the message sent is not the edited draft:\n%s", raw)
		}
		late := env.Do(t, sendoncetest.Request{Method: http.MethodPatch, Path: "/v1/drafts/" + id, Key: env.AdminKey, Body: map[string]any{"subject": "Late"}})
		if late.Status != http.StatusConflict || late.ErrorCode() != "invalid_state" {
			t.Errorf("PATCH after the send: %d %s, want 409 invalid_state", late.Status, late.Body)
		}
		// Deleting the sent draft keeps its send and allows no other.
		if del := env.Do(t, sendoncetest.Request{Method: http.MethodDelete, Path: "/v1/drafts/" + id, Key: env.AdminKey}); del.Status != http.StatusOK {
			t.Errorf("DELETE after the send: %d %s", del.Status, del.Body)
		}
		if r, _ := sendDraft(env, env.AdminKey, id); r.Status != http.StatusNotFound {
			t.Errorf("sending a deleted draft: %d %s, want 404", r.Status, r.Body)
		}
		if n := sendsUnder(t, env, key); n != 1 {
			t.Errorf("%d sends under the draft's key, want 1", n)
		}
	})
}

// A reply draft is filled as a reply (sender, "Re:", the inbox), is
// threaded when sent (In-Reply-To, References), and keeps the reply rules:
// a key without read may not make one, and an agent's reply to someone
// outside the thread waits for a person.
func TestDrafts_ReplyDraftThreadsAndKeepsTheReplyRules(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env, inbox, rcv := draftEnv(t, b)
		_, sendOnly := env.NewKey(t, app.NewKeyParams{Name: "send-only", Scopes: []core.Scope{core.ScopeSend}, Mailboxes: []string{inbox.ID}})
		_, agent := env.NewKey(t, app.NewKeyParams{Name: "agent", Agent: true, Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}, Mailboxes: []string{inbox.ID}})
		if r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/drafts", Key: sendOnly, IdemKey: "so",
			Body: map[string]any{"in_reply_to": rcv.ID, "text": "Hi"}}); r.Status != http.StatusForbidden {
			t.Errorf("a reply draft by a send-only key: %d %s, want 403", r.Status, r.Body)
		}
		d := createDraft(t, env, agent, "r-1", map[string]any{"in_reply_to": rcv.ID, "text": "Answer"})
		if to := d["to"].([]any); len(to) != 1 || d["subject"] != "Re: Question" || d["type"] != "reply" || d["thread_id"] != rcv.ThreadID {
			t.Fatalf("the reply draft: %v", d)
		}
		r, _ := sendDraft(env, agent, d["id"].(string))
		// Not held: the answer is the send as it is now, which delivery
		// may already have claimed.
		if st := r.JSON(t)["status"]; r.Status != http.StatusOK || (st != string(core.StatusQueued) && st != string(core.StatusSending) && st != string(core.StatusSent)) {
			t.Fatalf("an agent's reply inside the thread: %d %s, want queued (or on its way)", r.Status, r.Body)
		}
		env.WaitStatus(t, r.JSON(t)["id"].(string), 20*time.Second, core.StatusSent)
		raw := env.SMTP.Messages()[0].Data
		for _, want := range []string{"In-Reply-To: <q2@outside.example>", "References: <q1@outside.example> <q2@outside.example>", "Subject: Re: Question"} {
			if !bytes.Contains(raw, []byte(want)) {
				t.Errorf("the reply lacks %q:\n%s", want, raw)
			}
		}
		out := createDraft(t, env, agent, "r-2", map[string]any{"in_reply_to": rcv.ID, "to": "mallory@evil.example", "text": "Secrets"})
		r, _ = sendDraft(env, agent, out["id"].(string))
		if r.Status != http.StatusOK || r.JSON(t)["status"] != string(core.StatusPendingApproval) {
			t.Errorf("an agent's reply draft to someone outside the thread: %d %s, want pending_approval", r.Status, r.Body)
		}
	})
}

// Another tenant's drafts do not exist for a key: not listed, not read,
// not edited, deleted or sent.
func TestDrafts_TenantIsolation(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		_, other := env.NewKey(t, app.NewKeyParams{Name: "other", Tenant: "other", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}})
		id := createDraft(t, env, env.AdminKey, "d-1", map[string]any{"to": "ann@example.com", "subject": "Mine", "text": "x"})["id"].(string)
		for _, req := range []sendoncetest.Request{
			{Method: http.MethodGet, Path: "/v1/drafts/" + id},
			{Method: http.MethodPatch, Path: "/v1/drafts/" + id, Body: map[string]any{"subject": "Theirs"}},
			{Method: http.MethodDelete, Path: "/v1/drafts/" + id},
			{Method: http.MethodPost, Path: "/v1/drafts/" + id + "/send"},
		} {
			req.Key = other
			if r := env.Do(t, req); r.Status != http.StatusNotFound {
				t.Errorf("%s %s by another tenant: %d %s, want 404", req.Method, req.Path, r.Status, r.Body)
			}
		}
		if l := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/drafts", Key: other}).JSON(t); len(l["data"].([]any)) != 0 {
			t.Errorf("another tenant lists %v", l["data"])
		}
		if l := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/drafts", Key: env.AdminKey}).JSON(t); len(l["data"].([]any)) != 1 {
			t.Errorf("the owner lists %v, want its draft", l["data"])
		}
		if n := sendsUnder(t, env, app.DraftIdempotencyKey(id)); n != 0 {
			t.Errorf("%d sends of the draft, want 0", n)
		}
	})
}

// A tenant stores at most --max-drafts drafts: past it, 403
// limit_exceeded and nothing stored; deleting one makes room.
func TestDrafts_Capped(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true, Caps: core.Caps{core.ResourceDrafts: 1}}, func(t *testing.T, env *sendoncetest.Env) {
		id := createDraft(t, env, env.AdminKey, "d-1", map[string]any{"subject": "one"})["id"].(string)
		r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/drafts", Key: env.AdminKey, IdemKey: "d-2", Body: map[string]any{"subject": "two"}})
		if r.Status != http.StatusForbidden || r.ErrorCode() != "limit_exceeded" {
			t.Fatalf("a draft past the cap: %d %s, want 403 limit_exceeded", r.Status, r.Body)
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM drafts`); n != 1 {
			t.Errorf("%d drafts stored, want 1", n)
		}
		env.Do(t, sendoncetest.Request{Method: http.MethodDelete, Path: "/v1/drafts/" + id, Key: env.AdminKey})
		createDraft(t, env, env.AdminKey, "d-3", map[string]any{"subject": "three"})
	})
}
