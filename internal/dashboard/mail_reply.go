package dashboard

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// maxReplyText bounds the text of a reply typed in the page.
const maxReplyText = 64 << 10

// replyKeyPrefix marks the idempotency keys of the dashboard's replies, so
// that a send's key says where it came from.
const replyKeyPrefix = "ui-reply-"

// replyAnswer is what a reply's key stores: the send it made.
type replyAnswer struct {
	ID string `json:"id"`
}

// mailReply answers a received message from the thread page: the API's
// reply (app.Service.PrepareReply, AcceptSend) through the
// process's idempotency engine. The form's nonce, made when the page was
// rendered, is the key: a form submitted twice (a double click, a resend
// after a lost answer) sends one reply; a reloaded page has a new nonce,
// and is a new reply.
func (d *Dashboard) mailReply(q *req) error {
	ctx := q.ctx()
	nonce := q.r.PostFormValue("nonce")
	idemKey, err := idempotency.ParseKey(replyKeyPrefix+nonce, idempotency.MaxKeyLen)
	if nonce == "" || err != nil {
		return core.Errorf(core.CodeValidation, "nonce", "the reply form has no valid nonce: reload the page and try again")
	}
	text := strings.TrimSpace(q.r.PostFormValue("text"))
	if text == "" || len(text) > maxReplyText {
		return core.Errorf(core.CodeValidation, "text", "a reply is 1 to %d bytes of text", maxReplyText)
	}
	replyAll := q.r.PostFormValue("reply_all") == "1"
	// The fingerprint is the form's content: the same nonce with other
	// text is another reply under a used key, refused rather than sent.
	body, err := json.Marshal(map[string]any{"text": text, "reply_all": replyAll})
	if err != nil {
		return err
	}
	fp, err := idempotency.Fingerprint(body)
	if err != nil {
		return err
	}
	key := q.key
	id := q.r.PathValue("id")
	// The scope every door names a key under: a key limited to some
	// mailboxes has its keys in a namespace of its own, here too.
	sc, earlier := d.svc.IdempotencyScope(key, http.MethodPost, q.r.URL.Path, idemKey, idemKey, d.idem.TTL(), fp, nil)
	ran := idempotency.Run(ctx, d.idem, idempotency.Write[core.Tx]{
		Scope: sc, Earlier: earlier, Fingerprint: fp, InTx: d.svc.InTx,
		Prepare: func(ctx context.Context) (idempotency.Step[core.Tx], error) {
			// The API's one reply use case: its scopes and its guard (an
			// agent's key that signs in here is held like on every door).
			send, err := d.svc.PrepareReply(ctx, key, idemKey, id, replyAll, app.Guarded(key, false), &app.SendRequest{Text: text})
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, tx core.Tx) (idempotency.Response, error) {
				if err := d.svc.AcceptSend(ctx, tx, key, send); err != nil {
					return idempotency.Response{}, err
				}
				b, err := json.Marshal(replyAnswer{ID: send.ID})
				return idempotency.Response{Status: http.StatusOK, ContentType: "application/json", Body: b}, err
			}, nil
		},
		// Nothing refused is stored: the form shows the error, and the
		// same form, corrected, may be submitted again under its nonce.
		Refuse: func(error) (idempotency.Response, bool) { return idempotency.Response{}, false },
	})
	sendID, err := replyOutcome(ran)
	d.auditReply(ctx, q, idemKey, sendID, ran, err)
	if err != nil {
		return err
	}
	thread := ""
	if m, err := d.svc.ReceivedMessage(ctx, key, id); err == nil {
		thread = m.ThreadID
	}
	if thread == "" {
		http.Redirect(q.w, q.r, "/ui/sends/"+sendID, http.StatusSeeOther)
		return nil
	}
	http.Redirect(q.w, q.r, "/ui/mail/"+thread+"#msg-"+sendID, http.StatusSeeOther)
	return nil
}

// replyOutcome is the send a reply made or had made, or why there is none.
func replyOutcome(ran idempotency.Result) (string, error) {
	switch {
	case ran.Err != nil:
		return "", ran.Err
	case ran.Outcome == idempotency.InUse:
		return "", core.Errorf(core.CodeConflict, "", "this reply is still being sent: wait a moment and reload the thread")
	case ran.Outcome == idempotency.Mismatch:
		return "", core.Errorf(core.CodeConflict, "", "this form was already sent with other text: reload the thread to write another reply")
	case ran.Response == nil:
		return "", core.Errorf(core.CodeInternal, "", "the reply has no answer")
	}
	var a replyAnswer
	if err := json.Unmarshal(ran.Response.Body, &a); err != nil || a.ID == "" {
		return "", core.Errorf(core.CodeInternal, "", "the reply's stored answer is unreadable")
	}
	return a.ID, nil
}

// auditReply writes the reply to the audit log, as the API's send routes
// write an agent's: a reply is mail going out, and who sent it from the
// dashboard is asked later.
func (d *Dashboard) auditReply(ctx context.Context, q *req, idemKey, sendID string, ran idempotency.Result, err error) {
	e := &core.AuditEntry{Tenant: q.key.Tenant, APIKeyID: q.key.ID, Route: "POST /ui/received/{id}/reply",
		IdempotencyKey: idemKey, Status: http.StatusSeeOther, SendID: sendID, Outcome: "created"}
	switch {
	case err != nil:
		e.Outcome, e.Status, e.Code, e.Detail = "refused", http.StatusBadRequest, core.ErrorCode(err), err.Error()
		if core.ErrorCode(err) == core.CodeInternal {
			e.Outcome = "error"
		}
	case ran.Outcome == idempotency.Replay:
		e.Outcome = "replayed"
	}
	ctx = context.WithoutCancel(ctx)
	if err := d.svc.RecordAudit(ctx, e); err != nil {
		d.log.ErrorContext(ctx, "write audit entry", slog.Any("error", err))
	}
}
