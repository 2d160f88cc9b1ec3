package resend

import (
	"context"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

func (s *API) ListThreads(w http.ResponseWriter, r *http.Request) {
	key, in, err := s.inbox(r)
	var f core.ThreadFilter
	if err == nil {
		f, err = kit.ThreadFilter(r, in.Mailbox.ID)
	}
	var ts []*core.Thread
	var more bool
	if err == nil {
		ts, more, err = s.Svc.ListThreads(r.Context(), key, f)
	}
	s.AnswerResend(w, r, kit.ResendList[kit.ThreadView]{Object: "list", HasMore: more, Data: kit.Views(ts, kit.ViewThread)}, err)
}

// thread resolves {inbox} and {thread}: a thread of another inbox is
// not found.
func (s *API) thread(r *http.Request) (*core.APIKey, *core.Thread, error) {
	return inInbox(s, r, "thread", s.Svc.Thread, func(t *core.Thread) string { return t.MailboxID })
}

func (s *API) GetThread(w http.ResponseWriter, r *http.Request) {
	_, t, err := s.thread(r)
	s.AnswerResend(w, r, kit.Shown(t, err, kit.ViewThread), err)
}

func (s *API) UpdateThread(w http.ResponseWriter, r *http.Request) {
	key, t, err := s.thread(r)
	var req struct {
		Read   *bool   `json:"read"`
		Folder *string `json:"folder"`
	}
	if err == nil {
		var body []byte
		if body, err = s.ReadBody(w, r); err == nil {
			err = kit.DecodeStrict(body, &req)
		}
	}
	if err == nil {
		t, err = s.Svc.ChangeThread(r.Context(), key, t.ID, app.ThreadChange{Read: req.Read, Folder: req.Folder})
	}
	s.AnswerResend(w, r, kit.Shown(t, err, kit.ViewThread), err)
}

func (s *API) RemoveThread(w http.ResponseWriter, r *http.Request) {
	key, t, err := s.thread(r)
	if err == nil {
		err = s.Svc.DeleteThread(r.Context(), key, t.ID)
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, kit.ResendDeleted{Object: "inbox_thread", ID: t.ID, Deleted: true})
}

// resendReplyBody is the body of …/emails/{email}/reply and /forward.
type resendReplyBody struct {
	To          kit.AddrList         `json:"to"`
	Cc          kit.AddrList         `json:"cc"`
	Bcc         kit.AddrList         `json:"bcc"`
	HTML        string               `json:"html"`
	Text        string               `json:"text"`
	Subject     string               `json:"subject"`
	ReplyAll    bool                 `json:"reply_all"`
	Attachments []kit.AttachmentJSON `json:"attachments"`
	Headers     map[string]string    `json:"headers"`
}

// handleResendReplyThreadEmail answers a received message of the thread:
// an ordinary send through the idempotency engine, so the same
// Idempotency-Key twice sends one reply.
func (s *API) ReplyThreadEmail(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (kit.WriteStep, error) {
	return s.replyOrForward(ctx, key, r, body, idemKey, false)
}

func (s *API) ForwardThreadEmail(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (kit.WriteStep, error) {
	return s.replyOrForward(ctx, key, r, body, idemKey, true)
}

func (s *API) replyOrForward(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string, forward bool) (kit.WriteStep, error) {
	var req resendReplyBody
	if err := kit.DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	for h := range req.Headers {
		switch strings.ToLower(h) {
		case "in-reply-to", "references", "reply-to":
			return nil, core.Errorf(core.CodeValidation, "headers", "the %s header is set by sendonce", h)
		}
	}
	_, t, err := s.thread(r)
	if err != nil {
		return nil, err
	}
	sr := &app.SendRequest{To: req.To, Cc: req.Cc, Bcc: req.Bcc, Subject: req.Subject, Text: req.Text, HTML: req.HTML,
		Headers: req.Headers, Attachments: kit.AppAttachments(req.Attachments), MailboxID: t.MailboxID}
	m, err := s.Svc.ReceivedMessage(ctx, key, r.PathValue("email"))
	if err != nil || m.ThreadID != t.ID {
		return nil, core.ErrNotFound
	}
	// The one reply and forward use case of every door: its scopes,
	// defaults and guard.
	guarded := app.Guarded(key, kit.AgentAsked(r))
	var send *core.Send
	if forward {
		send, err = s.Svc.PrepareForward(ctx, key, idemKey, m.ID, guarded, sr)
	} else {
		send, err = s.Svc.PrepareReply(ctx, key, idemKey, m.ID, req.ReplyAll, guarded, sr)
	}
	if err != nil {
		return nil, err
	}
	return s.AcceptStep(key, send, resendIDView), nil
}
