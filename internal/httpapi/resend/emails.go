package resend

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"sort"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// Resend's email routes: POST /emails and /emails/batch, GET /emails and
// /emails/{id}, PATCH /emails/{id} and POST /emails/{id}/cancel, with Resend's field names, error body and idempotency
// errors, so that Resend's client libraries work by changing their base
// URL. docs/compatibility.md lists what still differs.

// resendMaxBatch is how many emails one batch may hold.
const resendMaxBatch = 100

type resendTag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// resendEmail is Resend's send-email body.
type resendEmail struct {
	From        string               `json:"from"`
	To          kit.AddrList         `json:"to"`
	Subject     string               `json:"subject"`
	Cc          kit.AddrList         `json:"cc"`
	Bcc         kit.AddrList         `json:"bcc"`
	ReplyTo     kit.AddrList         `json:"reply_to"`
	HTML        string               `json:"html"`
	Text        string               `json:"text"`
	Headers     map[string]string    `json:"headers"`
	Tags        []resendTag          `json:"tags"`
	ScheduledAt *string              `json:"scheduled_at"`
	Attachments []kit.AttachmentJSON `json:"attachments"`
	Template    *struct {
		ID        string         `json:"id"`
		Variables map[string]any `json:"variables"`
	} `json:"template"`
}

// prepareResend validates one email and renders it into a send.
func (s *API) prepareResend(ctx context.Context, key *core.APIKey, e *resendEmail, idemKey string) (*core.Send, error) {
	if e.Template != nil {
		if err := s.applyTemplateDefaults(ctx, key.Tenant, e); err != nil {
			return nil, err
		}
	}
	if e.From == "" {
		return nil, core.Errorf(core.CodeValidation, "from", "from is required")
	}
	if err := kit.CheckRecipientCounts(e.To, e.Cc, e.Bcc, e.ReplyTo); err != nil {
		return nil, err
	}
	var tags map[string]string
	for _, t := range e.Tags {
		if tags == nil {
			tags = map[string]string{}
		}
		if _, dup := tags[t.Name]; dup {
			return nil, core.Errorf(core.CodeValidation, "tags", "tag %q is given twice", t.Name)
		}
		tags[t.Name] = t.Value
	}
	mailboxID := core.DefaultMailboxID
	if a, err := mail.ParseAddress(e.From); err == nil {
		if mailboxID, err = s.Svc.MailboxForAddress(ctx, key.Tenant, a.Address); err != nil {
			return nil, err
		}
	}
	if err := checkHeaderNames(e.Headers); err != nil {
		return nil, err
	}
	headers, th := threadingHeaders(e.Headers)
	sr := &app.SendRequest{
		To: e.To, Cc: e.Cc, Bcc: e.Bcc, ReplyTo: e.ReplyTo, From: e.From, MailboxID: mailboxID,
		Subject: e.Subject, Text: e.Text, HTML: e.HTML, Headers: headers, Tags: tags,
		Attachments: kit.AppAttachments(e.Attachments), InReplyTo: th.inReplyTo, References: th.refs,
	}
	if e.ScheduledAt != nil {
		sr.ScheduledAt = *e.ScheduledAt
	}
	if e.Template != nil {
		sr.TemplateID, sr.Variables = e.Template.ID, e.Template.Variables
		if sr.Variables == nil {
			sr.Variables = map[string]any{}
		}
	}
	send, err := s.Svc.PrepareSend(ctx, key, idemKey, sr)
	if err != nil || th.messageID == "" {
		return send, err
	}
	id, ok := app.NormalizeMsgID(th.messageID)
	if !ok {
		return nil, core.Errorf(core.CodeValidation, "headers", "the Message-ID header must be a Message-ID such as <abc@example.com>")
	}
	send.RawMessageID = id // kept without its brackets, as made ones are
	return send, nil
}

type resendID struct {
	ID string `json:"id"`
}

// resendIDView is Resend's answer to a send: {"id"}.
func resendIDView(send *core.Send) any { return resendID{ID: send.ID} }

// CreatedSendIDs names the send an answer created (kit.Sender).
func (v resendID) CreatedSendIDs() []string { return []string{v.ID} }

func (s *API) Send(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (kit.WriteStep, error) {
	var e resendEmail
	if err := kit.DecodeStrict(body, &e); err != nil {
		return nil, err
	}
	send, err := s.prepareResend(ctx, key, &e, idemKey)
	if err != nil {
		return nil, err
	}
	return s.AcceptStep(key, send, resendIDView), nil
}

// handleResendBatch accepts up to 100 emails in one transaction under
// one idempotency key. x-batch-validation strict (the default) accepts
// all or none; permissive accepts the valid ones and reports the others
// by index. As on Resend, a batch carries no attachments and no
// scheduled_at.
func (s *API) Batch(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (kit.WriteStep, error) {
	mode := r.Header.Get("X-Batch-Validation")
	switch mode {
	case "", "strict", "permissive":
	default:
		return nil, core.Errorf(core.CodeValidation, "x-batch-validation", "x-batch-validation must be strict or permissive")
	}
	var emails []resendEmail
	if err := kit.DecodeStrict(body, &emails); err != nil {
		return nil, err
	}
	if len(emails) == 0 || len(emails) > resendMaxBatch {
		return nil, core.Errorf(core.CodeValidation, "", "a batch holds 1 to %d emails", resendMaxBatch)
	}
	sends := make([]*core.Send, 0, len(emails))
	var refused []resendBatchError
	for i := range emails {
		send, err := s.prepareBatched(ctx, key, &emails[i], idemKey)
		if err != nil {
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code == core.CodeInternal {
				return nil, err
			}
			if mode != "permissive" {
				return nil, &core.Error{Code: ce.Code, Param: fmt.Sprintf("[%d].%s", i, ce.Param), Message: fmt.Sprintf("email %d: %s", i, ce.Message)}
			}
			refused = append(refused, resendBatchError{Index: i, Message: ce.Message})
			continue
		}
		sends = append(sends, send)
	}
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		out := resendBatchView{Data: make([]resendID, 0, len(sends))}
		if mode == "permissive" {
			out.Errors = append([]resendBatchError{}, refused...)
		}
		for _, send := range sends {
			if err := s.Svc.AcceptSend(ctx, tx, key, send); err != nil {
				return 0, nil, err
			}
			out.Data = append(out.Data, resendID{ID: send.ID})
		}
		return http.StatusOK, out, nil
	}, nil
}

// prepareBatched is prepareResend for one email of a batch.
func (s *API) prepareBatched(ctx context.Context, key *core.APIKey, e *resendEmail, idemKey string) (*core.Send, error) {
	if len(e.Attachments) > 0 {
		return nil, core.Errorf(core.CodeValidation, "attachments", "attachments are not supported in a batch (as on Resend): send the email on its own")
	}
	if e.ScheduledAt != nil {
		return nil, core.Errorf(core.CodeValidation, "scheduled_at", "scheduled_at is not supported in a batch (as on Resend): send the email on its own")
	}
	return s.prepareResend(ctx, key, e, idemKey)
}

// resendBatchView is Resend's answer to a batch; Errors only in
// permissive mode.
type resendBatchView struct {
	Data   []resendID         `json:"data"`
	Errors []resendBatchError `json:"errors,omitempty"`
}

// resendBatchError is an email a permissive batch refused.
type resendBatchError struct {
	Index   int    `json:"index"`
	Message string `json:"message"`
}

func (v resendBatchView) CreatedSendIDs() []string {
	ids := make([]string, len(v.Data))
	for i, d := range v.Data {
		ids[i] = d.ID
	}
	return ids
}

// resendEmailView is Resend's email object.
type resendEmailView struct {
	Object      string      `json:"object"`
	ID          string      `json:"id"`
	To          []string    `json:"to"`
	From        string      `json:"from"`
	CreatedAt   string      `json:"created_at"`
	Subject     string      `json:"subject"`
	HTML        *string     `json:"html"`
	Text        *string     `json:"text"`
	Bcc         []string    `json:"bcc"`
	Cc          []string    `json:"cc"`
	ReplyTo     []string    `json:"reply_to"`
	LastEvent   string      `json:"last_event"`
	ScheduledAt *string     `json:"scheduled_at"`
	Tags        []resendTag `json:"tags"`
}

// resendEvent maps a send's status to Resend's last_event. sendonce's
// "sent" (the next hop answered 250) is Resend's "delivered" only for
// direct mx delivery, so it stays "sent"; unknown has no Resend name.
func resendEvent(st core.Status) string {
	switch st {
	case core.StatusPendingApproval, core.StatusQueued, core.StatusSending:
		return "queued"
	}
	return string(st)
}

func (s *API) Get(w http.ResponseWriter, r *http.Request) {
	send, err := s.Reads.Send(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	s.AnswerResend(w, r, kit.Shown(send, err, viewResendEmail), err)
}

func viewResendEmail(send *core.Send) resendEmailView {
	v := resendEmailView{
		Object: "email", ID: send.ID, To: kit.NonNil(send.To), From: send.From, CreatedAt: kit.RFC3339(send.CreatedAt),
		Subject: send.Subject, HTML: kit.OptString(send.HTML), Text: kit.OptString(send.Text), Bcc: kit.NonNil(send.Bcc),
		Cc: kit.NonNil(send.Cc), ReplyTo: kit.NonNil(send.ReplyTo), LastEvent: resendEvent(send.Status), Tags: []resendTag{},
		ScheduledAt: kit.OptTime(send.ScheduledAt),
	}
	for n, val := range send.Tags {
		v.Tags = append(v.Tags, resendTag{Name: n, Value: val})
	}
	slicesSortTags(v.Tags)
	return v
}

func slicesSortTags(t []resendTag) {
	sort.Slice(t, func(i, j int) bool { return t[i].Name < t[j].Name })
}

// resendEmailRef is Resend's answer to an update or a cancel.
type resendEmailRef struct {
	Object string `json:"object"`
	ID     string `json:"id"`
}

func (s *API) Update(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	send, err := s.Reschedule(ctx, tx, key, r, body)
	return kit.AnswerSend(send, err, resendRefView)
}

func (s *API) Cancel(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	send, err := s.Svc.Cancel(ctx, tx, key, r.PathValue("id"))
	return kit.AnswerSend(send, err, resendRefView)
}

// resendRefView is Resend's answer to a change: {"object":"email","id"}.
func resendRefView(send *core.Send) any { return resendEmailRef{Object: "email", ID: send.ID} }

// handleResendList is GET /emails: newest first, after or before an id.
func (s *API) List(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	q := r.URL.Query()
	limit, err := kit.ParseLimit(q.Get("limit"))
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	f := core.SendFilter{Limit: limit, After: q.Get("after"), Before: q.Get("before")}
	if f.After != "" && f.Before != "" {
		kit.WriteResendError(w, r, s.Logger, core.Errorf(core.CodeValidation, "after", "give after or before, not both"))
		return
	}
	if key.Agent {
		f.APIKeyID = key.ID
	}
	sends, next, err := s.Reads.ListSends(r.Context(), key.Tenant, f)
	s.AnswerResend(w, r, kit.ResendList[resendEmailView]{Object: "list", HasMore: next != "", Data: kit.Views(sends, viewResendEmail)}, err)
}

// replyHeaders are the threading headers of a Resend request.
type replyHeaders struct {
	messageID, inReplyTo string
	refs                 []string
}

// threadingHeaders takes Message-ID, In-Reply-To and References out of a
// Resend request's headers: Resend's documented way to reply in a thread
// is to set In-Reply-To there, and a sender that sets its own Message-ID
// (another sendonce relaying through this one, say) keeps it. sendonce
// writes all three from the send's own fields, validated as Message-IDs.
func threadingHeaders(h map[string]string) (map[string]string, replyHeaders) {
	var (
		rest map[string]string
		th   replyHeaders
	)
	for name, v := range h {
		switch strings.ToLower(name) {
		case "message-id":
			th.messageID = strings.TrimSpace(v)
		case "in-reply-to":
			th.inReplyTo = strings.TrimSpace(v)
		case "references":
			th.refs = strings.Fields(v)
		default:
			if rest == nil {
				rest = map[string]string{}
			}
			rest[name] = v
		}
	}
	return rest, th
}
