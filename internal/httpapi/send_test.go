package httpapi_test

// These tests prove docs/api.md's authentication and scopes, sending,
// lists, approvals, bad input, the capture inbox and templates against a whole running instance: a real database (SQLite and
// PostgreSQL, see sendoncetest.EachBackend), River, HTTP on 127.0.0.1 and,
// where delivery is observed, a recording SMTP relay.
//
// idempotency_test.go shares this package; to keep out of its way every
// helper here is a method of sendAPI.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	netmail "net/mail"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

const (
	// sendAPIWait bounds waits for something that must happen.
	sendAPIWait = 20 * time.Second
	// sendAPISettle is how long a test watches for something that must not
	// happen (a delivery): many poll intervals and retry periods.
	sendAPISettle = 400 * time.Millisecond
)

// sendAPI is a running instance plus the test that uses it.
type sendAPI struct {
	*sendoncetest.Env
	t *testing.T
}

func newSendAPI(t *testing.T, o sendoncetest.Options) *sendAPI {
	t.Helper()
	if o.RetryBase == 0 {
		o.RetryBase = 10 * time.Millisecond
	}
	return &sendAPI{Env: sendoncetest.Start(t, o), t: t}
}

// key creates an API key on the instance and returns its secret.
func (a *sendAPI) key(p app.NewKeyParams) string {
	a.t.Helper()
	if p.Name == "" {
		p.Name = "test"
	}
	_, secret := a.NewKey(a.t, p)
	return secret
}

func (a *sendAPI) get(key, path string) *sendoncetest.Response {
	a.t.Helper()
	return a.Do(a.t, sendoncetest.Request{Method: "GET", Path: path, Key: key})
}

// post sends body with a fresh Idempotency-Key.
func (a *sendAPI) post(key, path string, body any) *sendoncetest.Response {
	a.t.Helper()
	return a.Do(a.t, sendoncetest.Request{Method: "POST", Path: path, Key: key, IdemKey: rand.Text(), Body: body})
}

// sendOK posts a send that must be accepted and returns its JSON.
func (a *sendAPI) sendOK(key string, body any) map[string]any {
	a.t.Helper()
	r := a.post(key, "/v1/send", body)
	if r.Status != http.StatusOK {
		a.t.Fatalf("POST /v1/send: %d %s", r.Status, r.Body)
	}
	return r.JSON(a.t)
}

// status returns the send's current status as the admin sees it.
func (a *sendAPI) status(id string) string {
	a.t.Helper()
	r := a.get(a.AdminKey, "/v1/sends/"+id)
	if r.Status != http.StatusOK {
		a.t.Fatalf("GET /v1/sends/%s: %d %s", id, r.Status, r.Body)
	}
	s, _ := r.JSON(a.t)["status"].(string)
	return s
}

// wantError checks the contract's error shape, status, code and param.
func (a *sendAPI) wantError(what string, r *sendoncetest.Response, status int, code, param string) {
	a.t.Helper()
	var b struct {
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Error == nil || b.Error.Code == nil || b.Error.Message == nil {
		a.t.Errorf("%s: %d body %q is not {\"error\":{\"code\",\"message\",...}}", what, r.Status, r.Body)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		a.t.Errorf("%s: error Content-Type %q, want application/json", what, ct)
	}
	gotParam := ""
	if b.Error.Param != nil {
		gotParam = *b.Error.Param
	}
	if r.Status != status || *b.Error.Code != code || gotParam != param {
		a.t.Errorf("%s: %d code=%q param=%q (%s), want %d code=%q param=%q",
			what, r.Status, *b.Error.Code, gotParam, *b.Error.Message, status, code, param)
	}
	if *b.Error.Message == "" {
		a.t.Errorf("%s: empty error message", what)
	}
}

// listIDs returns the ids of GET /v1/sends{query} and its next cursor.
func (a *sendAPI) listIDs(key, query string) (ids []string, next any) {
	a.t.Helper()
	r := a.get(key, "/v1/sends"+query)
	if r.Status != http.StatusOK {
		a.t.Fatalf("GET /v1/sends%s: %d %s", query, r.Status, r.Body)
	}
	var l struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
		Next   any              `json:"next"`
	}
	if err := json.Unmarshal(r.Body, &l); err != nil || l.Object != "list" || l.Data == nil {
		a.t.Fatalf("GET /v1/sends%s: not a list: %v %s", query, err, r.Body)
	}
	for _, s := range l.Data {
		id, _ := s["id"].(string)
		ids = append(ids, id)
	}
	return ids, l.Next
}

// parts returns the decoded text and HTML of a delivered message.
func (a *sendAPI) parts(data []byte) (subject, text, html string) {
	a.t.Helper()
	m, err := netmail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		a.t.Fatalf("message does not parse: %v\n%s", err, data)
	}
	subject, err = new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		a.t.Fatalf("Subject does not decode: %v", err)
	}
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		a.t.Fatalf("Content-Type %q (%v), want multipart/alternative", m.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for range 10 {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			a.t.Fatalf("multipart: %v", err)
		}
		b, err := io.ReadAll(p) // NextPart decodes quoted-printable
		if err != nil {
			a.t.Fatalf("read part: %v", err)
		}
		switch ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type")); ct {
		case "text/plain":
			text = string(b)
		case "text/html":
			html = string(b)
		}
	}
	return subject, text, html
}

func TestSend_ResponseIsTheSendObject(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		r := a.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: a.AdminKey, IdemKey: "order-42",
			Body: map[string]any{"to": "Ann <ann@example.com>", "subject": "Hi", "text": "x", "tags": map[string]string{"k": "v"}}})
		if r.Status != http.StatusOK {
			t.Fatalf("POST /v1/send: %d %s", r.Status, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("Content-Type %q", ct)
		}
		s := r.JSON(t)
		for k, want := range map[string]any{
			"object": "send", "status": "queued", "idempotency_key": "order-42", "mailbox_id": "default",
			"from": "sender@example.com", "subject": "Hi", "template_id": nil, "attempts": 0.0, "last_error": nil,
			"sent_at": nil,
		} {
			if got, ok := s[k]; !ok || got != want {
				t.Errorf("%s = %#v, want %#v", k, got, want)
			}
		}
		if id, _ := s["id"].(string); !strings.HasPrefix(id, "snd_") {
			t.Errorf("id = %q, want snd_…", id)
		}
		if to := fmt.Sprint(s["to"]); to != `["Ann" <ann@example.com>]` && to != "[Ann <ann@example.com>]" {
			t.Errorf("to = %v", s["to"])
		}
		for _, k := range []string{"cc", "bcc"} {
			if l, ok := s[k].([]any); !ok || len(l) != 0 {
				t.Errorf("%s = %#v, want []", k, s[k])
			}
		}
		if tags, _ := s["tags"].(map[string]any); tags["k"] != "v" || len(tags) != 1 {
			t.Errorf("tags = %v", s["tags"])
		}
		if mid, _ := s["message_id"].(string); !strings.HasPrefix(mid, "<") || !strings.HasSuffix(mid, ">") || !strings.Contains(mid, "@") {
			t.Errorf("message_id = %q, want <…@…>", mid)
		}
		for _, k := range []string{"created_at", "updated_at"} {
			if v, _ := s[k].(string); v == "" {
				t.Errorf("%s missing", k)
			} else if _, err := time.Parse(time.RFC3339, v); err != nil {
				t.Errorf("%s = %q is not RFC 3339: %v", k, v, err)
			}
		}
		// GET returns the same send, with its events.
		g := a.get(a.AdminKey, "/v1/sends/"+s["id"].(string)).JSON(t)
		if g["id"] != s["id"] || g["message_id"] != s["message_id"] {
			t.Errorf("GET returned %v", g)
		}
		if ev, _ := g["events"].([]any); len(ev) == 0 {
			t.Errorf("GET /v1/sends/{id}: no events")
		} else if e, _ := ev[0].(map[string]any); e["type"] != "accepted" || e["at"] == nil {
			t.Errorf("first event = %v, want accepted with a time", ev[0])
		}
		ids, _ := a.listIDs(a.AdminKey, "?idempotency_key=order-42")
		if !slices.Equal(ids, []string{s["id"].(string)}) {
			t.Errorf("?idempotency_key=order-42 lists %v", ids)
		}
	})
}

func TestSend_ApprovalGatesDelivery(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, SMTP: true})
		gated := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}, RequiresApproval: true})

		approved := a.sendOK(gated, sendoncetest.Mail("ann@example.com", "needs approval"))
		rejected := a.sendOK(gated, sendoncetest.Mail("bob@example.com", "will be rejected"))
		for _, s := range []map[string]any{approved, rejected} {
			if s["status"] != string(core.StatusPendingApproval) {
				t.Fatalf("send by a key that requires approval answered status %v, want pending_approval", s["status"])
			}
		}
		approvedID, rejectedID := approved["id"].(string), rejected["id"].(string)

		t.Run("nothing is delivered while pending", func(t *testing.T) {
			time.Sleep(sendAPISettle)
			if c := a.SMTP.Connections(); c != 0 {
				t.Errorf("SMTP connections = %d while pending, want 0", c)
			}
			for _, id := range []string{approvedID, rejectedID} {
				if st := a.status(id); st != string(core.StatusPendingApproval) {
					t.Errorf("%s: status %q, want pending_approval", id, st)
				}
			}
		})

		t.Run("only admin may approve or reject", func(t *testing.T) {
			for _, action := range []string{"approve", "reject"} {
				r := a.post(gated, "/v1/sends/"+approvedID+"/"+action, nil)
				a.wantError(action+" without admin", r, http.StatusForbidden, core.CodeForbidden, "")
			}
			if st := a.status(approvedID); st != string(core.StatusPendingApproval) {
				t.Errorf("status %q after refused approve/reject, want pending_approval", st)
			}
		})

		t.Run("approve delivers exactly once", func(t *testing.T) {
			r := a.post(a.AdminKey, "/v1/sends/"+approvedID+"/approve", nil)
			if r.Status != http.StatusOK || r.JSON(t)["status"] != string(core.StatusQueued) {
				t.Fatalf("approve: %d %s, want 200 queued", r.Status, r.Body)
			}
			s := a.WaitStatus(t, approvedID, sendAPIWait, core.StatusSent)
			time.Sleep(sendAPISettle)
			msgs := a.SMTP.Messages()
			if len(msgs) != 1 || "<"+msgs[0].MessageID+">" != s["message_id"] {
				t.Fatalf("after approve the relay got %d messages, want exactly the approved one", len(msgs))
			}
			r = a.post(a.AdminKey, "/v1/sends/"+approvedID+"/approve", nil)
			a.wantError("approve again", r, http.StatusConflict, core.CodeInvalidState, "")
			r = a.post(a.AdminKey, "/v1/sends/"+approvedID+"/reject", nil)
			a.wantError("reject a sent send", r, http.StatusConflict, core.CodeInvalidState, "")
			if st := a.status(approvedID); st != string(core.StatusSent) {
				t.Errorf("status %q after refused transitions, want sent", st)
			}
		})

		t.Run("reject cancels for good", func(t *testing.T) {
			r := a.post(a.AdminKey, "/v1/sends/"+rejectedID+"/reject", nil)
			if r.Status != http.StatusOK || r.JSON(t)["status"] != string(core.StatusCanceled) {
				t.Fatalf("reject: %d %s, want 200 canceled", r.Status, r.Body)
			}
			r = a.post(a.AdminKey, "/v1/sends/"+rejectedID+"/approve", nil)
			a.wantError("approve a canceled send", r, http.StatusConflict, core.CodeInvalidState, "")
			time.Sleep(sendAPISettle)
			if st := a.status(rejectedID); st != string(core.StatusCanceled) {
				t.Errorf("status %q, want canceled", st)
			}
			if n := len(a.SMTP.Messages()); n != 1 {
				t.Errorf("relay got %d messages, want only the approved one", n)
			}
		})

		t.Run("approve of an unknown send is 404", func(t *testing.T) {
			r := a.post(a.AdminKey, "/v1/sends/snd_doesnotexist/approve", nil)
			a.wantError("approve unknown", r, http.StatusNotFound, core.CodeNotFound, "")
		})
	})
}

func TestTemplates_CRUD(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		put := func(id string, body any) *sendoncetest.Response {
			return a.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/" + id, Key: a.AdminKey, Body: body})
		}
		v1 := map[string]string{"subject": "Hi {{.name}}", "text": "Hello {{.name}}"}
		r := put("welcome", v1)
		if r.Status != http.StatusCreated {
			t.Fatalf("first PUT: %d %s, want 201", r.Status, r.Body)
		}
		if tpl := r.JSON(t); tpl["id"] != "welcome" || tpl["object"] != "template" || tpl["subject"] != v1["subject"] {
			t.Errorf("first PUT answered %v", tpl)
		}
		v2 := map[string]string{"subject": "Welcome {{.name}}", "text": "Hello again {{.name}}", "html": "<p>{{.name}}</p>"}
		if r := put("welcome", v2); r.Status != http.StatusOK {
			t.Fatalf("replacing PUT: %d %s, want 200", r.Status, r.Body)
		}
		if r := put("other", v1); r.Status != http.StatusCreated {
			t.Fatalf("PUT other: %d %s", r.Status, r.Body)
		}

		r = a.get(a.AdminKey, "/v1/templates/welcome")
		if r.Status != http.StatusOK {
			t.Fatalf("GET: %d %s", r.Status, r.Body)
		}
		tpl := r.JSON(t)
		for k, want := range v2 {
			if tpl[k] != want {
				t.Errorf("GET %s = %v, want %q (the replacement)", k, tpl[k], want)
			}
		}

		r = a.get(a.AdminKey, "/v1/templates")
		var l struct {
			Object string `json:"object"`
			Data   []struct{ ID string }
		}
		if err := json.Unmarshal(r.Body, &l); r.Status != http.StatusOK || err != nil || l.Object != "list" {
			t.Fatalf("GET /v1/templates: %d %s", r.Status, r.Body)
		}
		var ids []string
		for _, d := range l.Data {
			ids = append(ids, d.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"other", "welcome"}) {
			t.Errorf("templates listed %v, want other and welcome", ids)
		}

		r = a.Do(t, sendoncetest.Request{Method: "DELETE", Path: "/v1/templates/welcome", Key: a.AdminKey})
		if r.Status != http.StatusOK {
			t.Fatalf("DELETE: %d %s", r.Status, r.Body)
		}
		a.wantError("GET deleted", a.get(a.AdminKey, "/v1/templates/welcome"), http.StatusNotFound, core.CodeNotFound, "")
		r = a.Do(t, sendoncetest.Request{Method: "DELETE", Path: "/v1/templates/welcome", Key: a.AdminKey})
		a.wantError("DELETE deleted", r, http.StatusNotFound, core.CodeNotFound, "")
		r = a.post(a.AdminKey, "/v1/send", map[string]any{"to": "ann@example.com", "template_id": "welcome", "variables": map[string]any{"name": "Ann"}})
		a.wantError("send with a deleted template", r, http.StatusUnprocessableEntity, core.CodeValidation, "template_id")

		t.Run("invalid templates", func(t *testing.T) {
			for _, c := range []struct {
				name, id string
				body     any
				param    string
			}{
				{"no subject", "t1", map[string]string{"text": "x"}, "subject"},
				{"no body", "t2", map[string]string{"subject": "x"}, "text"},
				{"subject does not parse", "t3", map[string]string{"subject": "{{.a", "text": "x"}, "subject"},
				{"html does not parse", "t4", map[string]string{"subject": "x", "html": "{{if}}"}, "html"},
				{"bad id", "bad%20id", map[string]string{"subject": "x", "text": "x"}, "id"},
				{"unknown field", "t5", map[string]string{"subject": "x", "text": "x", "body": "x"}, "body"},
			} {
				a.wantError(c.name, put(c.id, c.body), http.StatusUnprocessableEntity, core.CodeValidation, c.param)
			}
			a.wantError("not JSON", put("t6", "{"), http.StatusBadRequest, core.CodeInvalidJSON, "")
		})

		t.Run("scopes", func(t *testing.T) {
			reader := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeRead}})
			sender := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeSend}})
			r := a.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/x", Key: reader, Body: v1})
			a.wantError("PUT with read", r, http.StatusForbidden, core.CodeForbidden, "")
			r = a.Do(t, sendoncetest.Request{Method: "DELETE", Path: "/v1/templates/other", Key: reader})
			a.wantError("DELETE with read", r, http.StatusForbidden, core.CodeForbidden, "")
			a.wantError("GET with send", a.get(sender, "/v1/templates/other"), http.StatusForbidden, core.CodeForbidden, "")
			if r := a.get(reader, "/v1/templates/other"); r.Status != http.StatusOK {
				t.Errorf("GET with read: %d", r.Status)
			}
		})
	})
}

func TestTemplates_RenderedAndEscaped(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, SMTP: true})
		r := a.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/receipt", Key: a.AdminKey, Body: map[string]string{
			"subject": "Receipt {{.order}} for {{.name}}",
			"text":    "Dear {{.name}}, you paid {{.amount}}.",
			"html":    `<p>Dear {{.name}}, you paid <a href="https://example.com/o/{{.order}}">{{.amount}}</a>.</p>`,
		}})
		if r.Status != http.StatusCreated {
			t.Fatalf("PUT template: %d %s", r.Status, r.Body)
		}
		s := a.sendOK(a.AdminKey, map[string]any{"to": "ann@example.com", "template_id": "receipt",
			"variables": map[string]any{"name": "<b>Ann</b> & co", "amount": "€12", "order": "A 7"}})
		if s["template_id"] != "receipt" {
			t.Errorf("template_id = %v, want receipt", s["template_id"])
		}
		if s["subject"] != "Receipt A 7 for <b>Ann</b> & co" {
			t.Errorf("subject = %q, want the rendered subject", s["subject"])
		}
		a.WaitStatus(t, s["id"].(string), sendAPIWait, core.StatusSent)
		msgs := a.SMTP.Messages()
		if len(msgs) != 1 {
			t.Fatalf("relay got %d messages, want 1", len(msgs))
		}
		subject, text, html := a.parts(msgs[0].Data)
		if subject != "Receipt A 7 for <b>Ann</b> & co" {
			t.Errorf("delivered Subject %q", subject)
		}
		if text != "Dear <b>Ann</b> & co, you paid €12." {
			t.Errorf("text part %q: variables must stay literal in text", text)
		}
		if want := `<p>Dear &lt;b&gt;Ann&lt;/b&gt; &amp; co, you paid <a href="https://example.com/o/A%207">€12</a>.</p>`; html != want {
			t.Errorf("html part\n%s\nwant (contextually escaped)\n%s", html, want)
		}
		if strings.Contains(html, "<b>") {
			t.Errorf("html part contains the unescaped variable: %s", html)
		}
	})
}

func TestTemplates_RenderErrors(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		for id, tpl := range map[string]map[string]string{
			"greet":      {"subject": "Hi {{.name}}", "text": "Hello {{.name}}, {{.greeting}}"},
			"htmlonly":   {"subject": "Hi", "html": "<p>{{.name}}</p>"},
			"subjectvar": {"subject": "Re: {{.topic}}", "text": "x"},
		} {
			if r := a.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/" + id, Key: a.AdminKey, Body: tpl}); r.Status != http.StatusCreated {
				t.Fatalf("PUT %s: %d %s", id, r.Status, r.Body)
			}
		}
		for _, c := range []struct {
			name        string
			body        map[string]any
			status      int
			code, param string
		}{
			{"missing variable", map[string]any{"template_id": "greet", "variables": map[string]any{"name": "Ann"}},
				http.StatusUnprocessableEntity, core.CodeTemplateMissingVar, "variables"},
			{"no variables at all", map[string]any{"template_id": "greet"},
				http.StatusUnprocessableEntity, core.CodeTemplateMissingVar, "variables"},
			{"missing variable in html", map[string]any{"template_id": "htmlonly", "variables": map[string]any{}},
				http.StatusUnprocessableEntity, core.CodeTemplateMissingVar, "variables"},
			{"CRLF into the subject", map[string]any{"template_id": "subjectvar", "variables": map[string]any{"topic": "x\r\nBcc: victim@example.com"}},
				http.StatusUnprocessableEntity, core.CodeValidation, "subject"},
			{"LF into the subject", map[string]any{"template_id": "subjectvar", "variables": map[string]any{"topic": "x\nBcc: victim@example.com"}},
				http.StatusUnprocessableEntity, core.CodeValidation, "subject"},
			{"unknown template", map[string]any{"template_id": "nope", "variables": map[string]any{}},
				http.StatusUnprocessableEntity, core.CodeValidation, "template_id"},
			{"template and subject", map[string]any{"template_id": "greet", "subject": "x", "variables": map[string]any{"name": "a", "greeting": "b"}},
				http.StatusUnprocessableEntity, core.CodeValidation, "template_id"},
			{"variables without template", map[string]any{"subject": "x", "text": "y", "variables": map[string]any{"a": 1}},
				http.StatusUnprocessableEntity, core.CodeValidation, "variables"},
		} {
			c.body["to"] = "ann@example.com"
			a.wantError(c.name, a.post(a.AdminKey, "/v1/send", c.body), c.status, c.code, c.param)
		}
		// None of them was accepted.
		if ids, _ := a.listIDs(a.AdminKey, ""); len(ids) != 0 {
			t.Errorf("refused sends were stored: %v", ids)
		}
	})
}

func TestInbox_CaptureKeepsTheWholeMessage(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend})
		const subject = "Captured — ünïcødé"
		s := a.sendOK(a.AdminKey, map[string]any{"to": "ann@example.com", "bcc": "hidden@example.com", "subject": subject, "text": "Body.", "html": "<p>Body.</p>"})
		id := s["id"].(string)
		a.WaitStatus(t, id, sendAPIWait, core.StatusSent)

		r := a.get(a.AdminKey, "/v1/inbox")
		var l struct {
			Object string           `json:"object"`
			Data   []map[string]any `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &l); r.Status != http.StatusOK || err != nil || l.Object != "list" {
			t.Fatalf("GET /v1/inbox: %d %s", r.Status, r.Body)
		}
		if len(l.Data) != 1 {
			t.Fatalf("inbox holds %d messages, want 1: %s", len(l.Data), r.Body)
		}
		item := l.Data[0]
		if item["send_id"] != id || item["message_id"] != s["message_id"] || item["subject"] != subject {
			t.Errorf("inbox item %v does not match the send", item)
		}
		msgID, _ := item["id"].(string)

		r = a.get(a.AdminKey, "/v1/inbox/"+msgID)
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/inbox/%s: %d %s", msgID, r.Status, r.Body)
		}
		one := r.JSON(t)
		if one["id"] != msgID || one["send_id"] != id {
			t.Errorf("GET /v1/inbox/{id} = %v", one)
		}
		raw, _ := one["raw"].(string)

		r = a.get(a.AdminKey, "/v1/inbox/"+msgID+"/raw")
		if r.Status != http.StatusOK {
			t.Fatalf("GET raw: %d %s", r.Status, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); ct != "message/rfc822" {
			t.Errorf("raw Content-Type %q, want message/rfc822", ct)
		}
		if raw != "" && raw != string(r.Body) {
			t.Errorf("GET /v1/inbox/{id} raw differs from /raw")
		}
		m, err := netmail.ReadMessage(bytes.NewReader(r.Body))
		if err != nil {
			t.Fatalf("raw message does not parse: %v", err)
		}
		if got := m.Header.Get("Message-Id"); got != s["message_id"] {
			t.Errorf("raw Message-ID %q, want %q", got, s["message_id"])
		}
		if got, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject")); err != nil || got != subject {
			t.Errorf("raw Subject decodes to %q (%v), want %q", got, err, subject)
		}
		if bytes.Contains(r.Body, []byte("hidden@example.com")) {
			t.Errorf("the Bcc address is in the captured message")
		}
		if _, text, html := a.parts(r.Body); text != "Body." || html != "<p>Body.</p>" {
			t.Errorf("captured parts %q / %q", text, html)
		}

		a.wantError("unknown inbox id", a.get(a.AdminKey, "/v1/inbox/msg_nope"), http.StatusNotFound, core.CodeNotFound, "")
		a.wantError("unknown raw", a.get(a.AdminKey, "/v1/inbox/msg_nope/raw"), http.StatusNotFound, core.CodeNotFound, "")
		sender := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeSend}})
		a.wantError("inbox without read", a.get(sender, "/v1/inbox"), http.StatusForbidden, core.CodeForbidden, "")
	})
}

func TestAuth_MissingOrInvalidKeyIs401(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		k, revoked := a.NewKey(t, app.NewKeyParams{Name: "revoked", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
		if err := a.Server.Service.RevokeKey(context.Background(), k.ID); err != nil {
			t.Fatal(err)
		}
		// A valid-looking secret for the admin key's id with the wrong tail.
		id, _, _ := strings.Cut(strings.TrimPrefix(a.AdminKey, "so_"), "_")
		forged := "so_" + id + "_" + strings.Repeat("a", 52)
		client := &http.Client{Timeout: sendAPIWait}

		for _, c := range []struct {
			name string
			auth []string // Authorization header values; nil for none
		}{
			{"no header", nil},
			{"empty", []string{""}},
			{"basic", []string{"Basic dXNlcjpwYXNz"}},
			{"bearer without secret", []string{"Bearer "}},
			{"lower-case scheme, garbage", []string{"bearer xyz"}},
			{"garbage", []string{"Bearer not-a-key"}},
			{"unknown key", []string{"Bearer so_aaaaaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}},
			{"forged secret", []string{"Bearer " + forged}},
			{"revoked", []string{"Bearer " + revoked}},
			{"two headers", []string{"Bearer " + a.AdminKey, "Bearer " + a.AdminKey}},
		} {
			for _, route := range []struct{ method, path string }{
				{"POST", "/v1/send"}, {"GET", "/v1/sends"}, {"GET", "/v1/templates"}, {"GET", "/v1/inbox"},
				{"POST", "/v1/sends/snd_x/approve"}, {"PUT", "/v1/templates/x"},
			} {
				req, err := http.NewRequest(route.method, a.URL+route.path, strings.NewReader(`{"to":"a@example.com","subject":"s","text":"t"}`))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Idempotency-Key", rand.Text())
				for _, v := range c.auth {
					req.Header.Add("Authorization", v)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				r := &sendoncetest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
				a.wantError(c.name+" "+route.method+" "+route.path, r, http.StatusUnauthorized, core.CodeUnauthorized, "")
				if resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s %s: 401 without WWW-Authenticate", c.name, route.method, route.path)
				}
			}
		}
		if ids, _ := a.listIDs(a.AdminKey, ""); len(ids) != 0 {
			t.Errorf("unauthenticated requests created sends: %v", ids)
		}
	})
}

func TestAuth_ScopesAndMailboxes(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		if r := a.post(a.AdminKey, "/v1/mailboxes", map[string]any{"id": "a", "address": "a@example.com", "name": "Team A"}); r.Status != http.StatusCreated {
			t.Fatalf("create mailbox a: %d %s", r.Status, r.Body)
		}
		reader := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeRead}})
		sender := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}})
		onlyA := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}, Mailboxes: []string{"a"}})
		msg := sendoncetest.Mail("ann@example.com", "scoped")

		t.Run("read-only key may not send", func(t *testing.T) {
			a.wantError("send with read", a.post(reader, "/v1/send", msg), http.StatusForbidden, core.CodeForbidden, "")
		})
		t.Run("mailbox-limited key sends only from its mailboxes", func(t *testing.T) {
			a.wantError("from default (implicit)", a.post(onlyA, "/v1/send", msg), http.StatusForbidden, core.CodeForbidden, "mailbox_id")
			body := map[string]any{"mailbox_id": "default", "to": "ann@example.com", "subject": "x", "text": "y"}
			a.wantError("from default", a.post(onlyA, "/v1/send", body), http.StatusForbidden, core.CodeForbidden, "mailbox_id")
			body["mailbox_id"] = "a"
			s := a.sendOK(onlyA, body)
			if s["mailbox_id"] != "a" || s["from"] != `"Team A" <a@example.com>` {
				t.Errorf("send from a: mailbox_id=%v from=%v", s["mailbox_id"], s["from"])
			}
		})
		t.Run("admin routes need admin", func(t *testing.T) {
			s := a.sendOK(a.AdminKey, msg)
			id := s["id"].(string)
			for _, p := range []string{"/v1/sends/" + id + "/approve", "/v1/sends/" + id + "/reject"} {
				a.wantError(p, a.post(sender, p, nil), http.StatusForbidden, core.CodeForbidden, "")
			}
			a.wantError("reconcile", a.post(sender, "/v1/sends/"+id+"/reconcile", map[string]string{"outcome": "sent"}), http.StatusForbidden, core.CodeForbidden, "")
			a.wantError("create mailbox", a.post(sender, "/v1/mailboxes", map[string]any{"id": "b", "address": "b@example.com"}), http.StatusForbidden, core.CodeForbidden, "")
			if st := a.status(id); st != string(core.StatusQueued) {
				t.Errorf("status %q after refused admin calls, want queued", st)
			}
		})
		t.Run("a send key without read cannot read", func(t *testing.T) {
			sendOnly := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeSend}})
			a.wantError("list", a.get(sendOnly, "/v1/sends"), http.StatusForbidden, core.CodeForbidden, "")
		})
		t.Run("a 403 is not stored under the Idempotency-Key", func(t *testing.T) {
			const k = "scoped-key-1"
			r := a.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: reader, IdemKey: k, Body: msg})
			a.wantError("first with read", r, http.StatusForbidden, core.CodeForbidden, "")
			r = a.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: sender, IdemKey: k, Body: msg})
			if r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "" {
				t.Errorf("same key with a sending key: %d replayed=%q %s, want a fresh 200", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
			}
		})
	})
}

func TestAuth_TenantsAreIsolated(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend})
		all := []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}
		other := a.key(app.NewKeyParams{Tenant: "other", Scopes: all})

		if r := a.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/mine", Key: a.AdminKey,
			Body: map[string]string{"subject": "Hi", "text": "x"}}); r.Status != http.StatusCreated {
			t.Fatalf("PUT template: %d %s", r.Status, r.Body)
		}
		if r := a.post(a.AdminKey, "/v1/mailboxes", map[string]any{"id": "team", "address": "team@example.com"}); r.Status != http.StatusCreated {
			t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
		}
		s := a.sendOK(a.AdminKey, map[string]any{"to": "ann@example.com", "template_id": "mine", "mailbox_id": "team"})
		id := s["id"].(string)
		a.WaitStatus(t, id, sendAPIWait, core.StatusSent)
		var inbox struct{ Data []struct{ ID string } }
		if err := json.Unmarshal(a.get(a.AdminKey, "/v1/inbox").Body, &inbox); err != nil || len(inbox.Data) != 1 {
			t.Fatalf("own inbox: %v %v", err, inbox)
		}
		msgID := inbox.Data[0].ID

		for _, path := range []string{"/v1/sends/" + id, "/v1/templates/mine", "/v1/inbox/" + msgID, "/v1/inbox/" + msgID + "/raw", "/v1/mailboxes/team"} {
			a.wantError("other tenant GET "+path, a.get(other, path), http.StatusNotFound, core.CodeNotFound, "")
		}
		if ids, _ := a.listIDs(other, ""); len(ids) != 0 {
			t.Errorf("other tenant lists sends %v", ids)
		}
		if ids, _ := a.listIDs(other, "?idempotency_key="+fmt.Sprint(s["idempotency_key"])); len(ids) != 0 {
			t.Errorf("other tenant finds the send by idempotency key: %v", ids)
		}
		for _, path := range []string{"/v1/templates", "/v1/inbox"} {
			var l struct{ Data []any }
			r := a.get(other, path)
			if err := json.Unmarshal(r.Body, &l); r.Status != http.StatusOK || err != nil || len(l.Data) != 0 {
				t.Errorf("other tenant GET %s: %d %s, want an empty list", path, r.Status, r.Body)
			}
		}
		var mbs struct{ Data []struct{ ID string } }
		if err := json.Unmarshal(a.get(other, "/v1/mailboxes").Body, &mbs); err != nil || len(mbs.Data) != 1 || mbs.Data[0].ID != "default" {
			t.Errorf("other tenant's mailboxes: %v %v, want only its own default", err, mbs)
		}
		for _, action := range []string{"approve", "reject"} {
			a.wantError("other tenant "+action, a.post(other, "/v1/sends/"+id+"/"+action, nil), http.StatusNotFound, core.CodeNotFound, "")
		}
		a.wantError("other tenant reconcile", a.post(other, "/v1/sends/"+id+"/reconcile", map[string]string{"outcome": "resend"}),
			http.StatusNotFound, core.CodeNotFound, "")
		r := a.Do(t, sendoncetest.Request{Method: "DELETE", Path: "/v1/templates/mine", Key: other})
		a.wantError("other tenant DELETE template", r, http.StatusNotFound, core.CodeNotFound, "")
		a.wantError("other tenant sends with our template", a.post(other, "/v1/send", map[string]any{"to": "x@example.com", "template_id": "mine"}),
			http.StatusUnprocessableEntity, core.CodeValidation, "template_id")
		a.wantError("other tenant sends from our mailbox", a.post(other, "/v1/send", map[string]any{"to": "x@example.com", "subject": "s", "text": "t", "mailbox_id": "team"}),
			http.StatusUnprocessableEntity, core.CodeValidation, "mailbox_id")

		// And ours is untouched.
		if r := a.get(a.AdminKey, "/v1/templates/mine"); r.Status != http.StatusOK {
			t.Errorf("our template after the other tenant's DELETE: %d", r.Status)
		}
		if st := a.status(id); st != string(core.StatusSent) {
			t.Errorf("our send is %q", st)
		}
	})
}

func TestSends_ListFiltersAndPaginates(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		var created []string
		for i := range 5 {
			created = append(created, a.sendOK(a.AdminKey, sendoncetest.Mail(fmt.Sprintf("r%d@example.com", i), "list"))["id"].(string))
		}
		// Deliver two of them (capture) by running their attempts directly.
		sent := created[1:3]
		a.DeliverNow(t, sent...)
		queued := []string{created[0], created[3], created[4]}
		if m := a.get("", "/metrics"); !bytes.Contains(m.Body, []byte("\nsendonce_queue_depth 3\n")) {
			t.Errorf("/metrics does not report the 3 queued sends as sendonce_queue_depth 3")
		}

		page := func(query string, limit int) []string {
			t.Helper()
			var seen []string
			after := ""
			for range 10 {
				q := fmt.Sprintf("?limit=%d%s", limit, query)
				if after != "" {
					q += "&after=" + after
				}
				ids, next := a.listIDs(a.AdminKey, q)
				if len(ids) > limit {
					t.Fatalf("%s returned %d > limit", q, len(ids))
				}
				seen = append(seen, ids...)
				if next == nil {
					return seen
				}
				n, ok := next.(string)
				if !ok || n == "" || len(ids) != limit {
					t.Fatalf("%s: next = %#v after %d items", q, next, len(ids))
				}
				after = n
			}
			t.Fatalf("pagination did not end")
			return nil
		}
		same := func(what string, got, want []string) {
			t.Helper()
			g, w := slices.Clone(got), slices.Clone(want)
			slices.Sort(g)
			slices.Sort(w)
			if !slices.Equal(g, w) {
				t.Errorf("%s: got %v, want each of %v once", what, got, want)
			}
		}
		same("all, by 2", page("", 2), created)
		same("all, by 1", page("", 1), created)
		same("all, by 5", page("", 5), created)
		same("all, by 100", page("", 100), created)
		same("queued, by 2", page("&status=queued", 2), queued)
		same("sent, by 2", page("&status=sent", 2), sent)
		same("canceled", page("&status=canceled", 2), nil)

		if ids, _ := a.listIDs(a.AdminKey, "?limit=2"); !slices.Equal(ids, []string{created[4], created[3]}) {
			t.Errorf("first page %v, want the newest first", ids)
		}
		if ids, next := a.listIDs(a.AdminKey, "?limit=5"); len(ids) != 5 || next != nil {
			t.Errorf("exactly 5 of 5: next = %#v, want null", next)
		}
		if ids, _ := a.listIDs(a.AdminKey, ""); len(ids) != 5 {
			t.Errorf("default limit lists %d", len(ids))
		}

		for _, q := range []string{"?limit=0", "?limit=-1", "?limit=101", "?limit=abc", "?limit=1.5"} {
			a.wantError(q, a.get(a.AdminKey, "/v1/sends"+q), http.StatusUnprocessableEntity, core.CodeValidation, "limit")
		}
		for _, q := range []string{"?status=bogus", "?status=SENT", "?status=queued,sent"} {
			a.wantError(q, a.get(a.AdminKey, "/v1/sends"+q), http.StatusUnprocessableEntity, core.CodeValidation, "status")
		}
		a.wantError("GET unknown send", a.get(a.AdminKey, "/v1/sends/snd_nope"), http.StatusNotFound, core.CodeNotFound, "")
	})
}

func TestSend_BadInputIsAClear4xx(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		many := make([]string, 51)
		for i := range many {
			many[i] = fmt.Sprintf("r%d@example.com", i)
		}
		ok := func(over map[string]any) map[string]any {
			b := map[string]any{"to": "ann@example.com", "subject": "Hi", "text": "Hello"}
			for k, v := range over {
				if v == nil {
					delete(b, k)
				} else {
					b[k] = v
				}
			}
			return b
		}
		big := `{"to":"ann@example.com","subject":"big","text":"` + strings.Repeat("a", 41<<20) + `"}`
		const v, j = http.StatusUnprocessableEntity, http.StatusBadRequest
		for _, c := range []struct {
			name   string
			body   any // string: raw bytes
			status int
			code   string
			param  string
		}{
			{"not JSON", "{", j, core.CodeInvalidJSON, ""},
			{"plain text", "hello", j, core.CodeInvalidJSON, ""},
			{"empty body", "", j, core.CodeInvalidJSON, ""},
			{"two objects", `{"to":"a@example.com"}{}`, j, core.CodeInvalidJSON, ""},
			{"duplicate member", `{"to":"a@example.com","to":"b@example.com","subject":"s","text":"t"}`, j, core.CodeInvalidJSON, ""},
			{"invalid UTF-8", "{\"to\":\"a@example.com\",\"subject\":\"\xff\",\"text\":\"t\"}", j, core.CodeInvalidJSON, ""},
			{"JSON array", `[{"to":"a@example.com","subject":"s","text":"t"}]`, v, core.CodeValidation, ""},
			{"JSON string", `"hello"`, v, core.CodeValidation, ""},
			{"JSON null", `null`, v, core.CodeValidation, "to"},
			{"to is a number", ok(map[string]any{"to": 5}), v, core.CodeValidation, "to"},
			{"to holds a number", ok(map[string]any{"to": []any{5}}), v, core.CodeValidation, "to"},
			{"cc is an object", ok(map[string]any{"cc": map[string]any{}}), v, core.CodeValidation, "cc"},
			{"subject is an array", ok(map[string]any{"subject": []any{}}), v, core.CodeValidation, "subject"},
			{"text is a number", ok(map[string]any{"text": 1}), v, core.CodeValidation, "text"},
			{"headers is a list", ok(map[string]any{"headers": []any{"X-A: b"}}), v, core.CodeValidation, "headers"},
			{"tags hold a number", ok(map[string]any{"tags": map[string]any{"a": 1}}), v, core.CodeValidation, "tags"},
			{"variables is a string", ok(map[string]any{"variables": "x"}), v, core.CodeValidation, "variables"},
			{"unknown field", ok(map[string]any{"suject": "typo"}), v, core.CodeValidation, "suject"},
			{"no to", ok(map[string]any{"to": nil}), v, core.CodeValidation, "to"},
			{"empty to", ok(map[string]any{"to": []string{}}), v, core.CodeValidation, "to"},
			{"51 recipients", ok(map[string]any{"to": many}), v, core.CodeValidation, "to"},
			{"51 cc", ok(map[string]any{"cc": many}), v, core.CodeValidation, "cc"},
			{"51 bcc", ok(map[string]any{"bcc": many}), v, core.CodeValidation, "bcc"},
			{"invalid address", ok(map[string]any{"to": "not-an-address"}), v, core.CodeValidation, "to"},
			{"invalid cc", ok(map[string]any{"cc": []string{"ok@example.com", "@@"}}), v, core.CodeValidation, "cc"},
			{"invalid from", ok(map[string]any{"from": "nobody"}), v, core.CodeValidation, "from"},
			{"two addresses in from", ok(map[string]any{"from": "a@example.com, b@example.com"}), v, core.CodeValidation, "from"},
			{"41 MiB body (over --max-request-size)", big, http.StatusRequestEntityTooLarge, "payload_too_large", ""},
			{"CRLF in subject", ok(map[string]any{"subject": "Hi\r\nBcc: victim@example.com"}), v, core.CodeValidation, "subject"},
			{"LF in subject", ok(map[string]any{"subject": "Hi\nX-Evil: 1"}), v, core.CodeValidation, "subject"},
			{"CR in subject", ok(map[string]any{"subject": "Hi\rX-Evil: 1"}), v, core.CodeValidation, "subject"},
			{"CRLF in to", ok(map[string]any{"to": "ann@example.com\r\nBcc: victim@example.com"}), v, core.CodeValidation, "to"},
			{"CRLF in to display name", ok(map[string]any{"to": "\"Ann\r\nBcc: v@example.com\" <ann@example.com>"}), v, core.CodeValidation, "to"},
			{"CRLF in cc", ok(map[string]any{"cc": "c@example.com\r\nX: y"}), v, core.CodeValidation, "cc"},
			{"CRLF in bcc", ok(map[string]any{"bcc": "c@example.com\nX: y"}), v, core.CodeValidation, "bcc"},
			{"CRLF in from", ok(map[string]any{"from": "Me <me@example.com>\r\nBcc: victim@example.com"}), v, core.CodeValidation, "from"},
			{"CRLF in reply_to", ok(map[string]any{"reply_to": "r@example.com\r\nBcc: victim@example.com"}), v, core.CodeValidation, "reply_to"},
			{"CRLF in header name", ok(map[string]any{"headers": map[string]string{"X-A\r\nBcc": "victim@example.com"}}), v, core.CodeValidation, "headers"},
			{"LF in header value", ok(map[string]any{"headers": map[string]string{"X-A": "b\nBcc: victim@example.com"}}), v, core.CodeValidation, "headers"},
			{"CRLF in header value", ok(map[string]any{"headers": map[string]string{"X-A": "b\r\nBcc: victim@example.com"}}), v, core.CodeValidation, "headers"},
			{"NUL in header value", ok(map[string]any{"headers": map[string]string{"X-A": "b\x00c"}}), v, core.CodeValidation, "headers"},
			{"colon in header name", ok(map[string]any{"headers": map[string]string{"X-A: b": "c"}}), v, core.CodeValidation, "headers"},
			{"space in header name", ok(map[string]any{"headers": map[string]string{"X A": "c"}}), v, core.CodeValidation, "headers"},
			{"empty header name", ok(map[string]any{"headers": map[string]string{"": "c"}}), v, core.CodeValidation, "headers"},
			{"reserved header Bcc", ok(map[string]any{"headers": map[string]string{"Bcc": "victim@example.com"}}), v, core.CodeValidation, "headers"},
			{"reserved header bcc", ok(map[string]any{"headers": map[string]string{"bcc": "victim@example.com"}}), v, core.CodeValidation, "headers"},
			{"reserved header From", ok(map[string]any{"headers": map[string]string{"From": "boss@example.com"}}), v, core.CodeValidation, "headers"},
			{"reserved header Message-ID", ok(map[string]any{"headers": map[string]string{"Message-ID": "<x@y>"}}), v, core.CodeValidation, "headers"},
			{"reserved header Content-Type", ok(map[string]any{"headers": map[string]string{"Content-Type": "text/html"}}), v, core.CodeValidation, "headers"},
			{"reserved header To", ok(map[string]any{"headers": map[string]string{"TO": "x@example.com"}}), v, core.CodeValidation, "headers"},
			{"unknown template", ok(map[string]any{"subject": nil, "text": nil, "template_id": "nope"}), v, core.CodeValidation, "template_id"},
			{"unknown mailbox", ok(map[string]any{"mailbox_id": "nope"}), v, core.CodeValidation, "mailbox_id"},
			{"template_id and subject", ok(map[string]any{"template_id": "nope", "text": nil}), v, core.CodeValidation, "template_id"},
			{"no text and no html", ok(map[string]any{"text": nil}), v, core.CodeValidation, "text"},
			{"empty text and html", ok(map[string]any{"text": "", "html": ""}), v, core.CodeValidation, "text"},
			{"no subject", ok(map[string]any{"subject": nil}), v, core.CodeValidation, "subject"},
			{"blank subject", ok(map[string]any{"subject": "   "}), v, core.CodeValidation, "subject"},
			{"999-byte subject", ok(map[string]any{"subject": strings.Repeat("s", 999)}), v, core.CodeValidation, "subject"},
			{"empty tag name", ok(map[string]any{"tags": map[string]string{"": "x"}}), v, core.CodeValidation, "tags"},
			{"long tag value", ok(map[string]any{"tags": map[string]string{"a": strings.Repeat("x", 257)}}), v, core.CodeValidation, "tags"},
		} {
			r := a.post(a.AdminKey, "/v1/send", c.body)
			if r.Status >= 500 {
				t.Errorf("%s: %d %s: a client's mistake must never be a 5xx", c.name, r.Status, r.Body)
				continue
			}
			a.wantError(c.name, r, c.status, c.code, c.param)
		}
		if ids, _ := a.listIDs(a.AdminKey, ""); len(ids) != 0 {
			t.Errorf("refused requests created sends: %v", ids)
		}
	})
}

func TestOps_HealthzAndMetrics(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, SMTP: true, MaxAttempts: 2})
		r := a.get("", "/healthz")
		if r.Status != http.StatusOK {
			t.Errorf("GET /healthz without a key: %d %s", r.Status, r.Body)
		}

		sent := a.sendOK(a.AdminKey, sendoncetest.Mail("ann@example.com", "counted"))
		a.WaitStatus(t, sent["id"].(string), sendAPIWait, core.StatusSent)
		a.SMTP.SetBehaviour(smtptest.Behaviour{HangUpAfterData: true})
		unknown := a.sendOK(a.AdminKey, sendoncetest.Mail("bob@example.com", "counted"))
		a.WaitStatus(t, unknown["id"].(string), sendAPIWait, core.StatusUnknown)

		r = a.get("", "/metrics")
		if r.Status != http.StatusOK {
			t.Fatalf("GET /metrics without a key: %d %s", r.Status, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("metrics Content-Type %q, want the Prometheus text format", ct)
		}
		values := map[string]string{}
		for _, line := range strings.Split(string(r.Body), "\n") {
			if name, val, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
				values[name] = val
			}
		}
		for series, want := range map[string]string{
			`sendonce_sends_accepted_total`:                         "2",
			`sendonce_delivery_attempts_total{outcome="sent"}`:      "1",
			`sendonce_delivery_attempts_total{outcome="unknown"}`:   "1",
			`sendonce_delivery_attempts_total{outcome="tempfail"}`:  "0",
			`sendonce_delivery_attempts_total{outcome="permfail"}`:  "0",
			`sendonce_queue_depth`:                                  "0",
			`sendonce_idempotent_replays_total`:                     "0",
			`sendonce_idempotency_conflicts_total{reason="in_use"}`: "0",
			`sendonce_idempotency_conflicts_total{reason="reused"}`: "0",
		} {
			if got, ok := values[series]; !ok || got != want {
				t.Errorf("%s = %q (present %v), want %s", series, got, ok, want)
			}
		}
		for _, secret := range []string{a.AdminKey} {
			if bytes.Contains(r.Body, []byte(secret)) {
				t.Errorf("metrics expose a key secret")
			}
		}
	})
}

// A revoked key stops working: at once when revoked through this process,
// and within app.KeyCacheTTL when another process (sendonce keys revoke)
// revoked it in the database, though this one had it cached.
func TestAuth_RevocationTakesEffect(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		scopes := []core.Scope{core.ScopeRead}

		here, hereSecret := a.NewKey(t, app.NewKeyParams{Name: "here", Scopes: scopes})
		if r := a.get(hereSecret, "/v1/sends"); r.Status != http.StatusOK {
			t.Fatalf("before revocation: %d", r.Status)
		}
		if err := a.Server.Service.RevokeKey(context.Background(), here.ID); err != nil {
			t.Fatal(err)
		}
		a.wantError("revoked here", a.get(hereSecret, "/v1/sends"), http.StatusUnauthorized, core.CodeUnauthorized, "")

		there, thereSecret := a.NewKey(t, app.NewKeyParams{Name: "there", Scopes: scopes})
		if r := a.get(thereSecret, "/v1/sends"); r.Status != http.StatusOK {
			t.Fatalf("before revocation: %d", r.Status)
		}
		a.Exec(t, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, time.Now().UnixMicro(), there.ID)
		time.Sleep(app.KeyCacheTTL + 100*time.Millisecond)
		a.wantError("revoked by another process", a.get(thereSecret, "/v1/sends"), http.StatusUnauthorized, core.CodeUnauthorized, "")
	})
}

// Mailboxes are cached for a second per process, misses are not: a
// mailbox created through this process is used at once, also by the send
// right after one that failed because it did not exist yet.
func TestMailboxes_CreatedMailboxIsUsedAtOnce(t *testing.T) {
	a := newSendAPI(t, sendoncetest.Options{NoWorkers: true})
	body := map[string]any{"mailbox_id": "c", "to": "ann@example.com", "subject": "c", "text": "c"}
	a.wantError("before it exists", a.post(a.AdminKey, "/v1/send", body), http.StatusUnprocessableEntity, core.CodeValidation, "mailbox_id")
	if r := a.post(a.AdminKey, "/v1/mailboxes", map[string]any{"id": "c", "address": "c@example.com", "name": "Team C"}); r.Status != http.StatusCreated {
		t.Fatalf("create mailbox c: %d %s", r.Status, r.Body)
	}
	if from := a.sendOK(a.AdminKey, body)["from"]; from != `"Team C" <c@example.com>` {
		t.Fatalf("from %v right after mailbox c was created, want it", from)
	}
}
