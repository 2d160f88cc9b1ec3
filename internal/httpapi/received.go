package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// The native received-message routes the MCP server's mail tools call
// (docs/agents.md, "Reading mail"): list and read received messages, and
// reply to or forward one. Replies and forwards are sends: they go
// through the idempotency engine and the audit log as POST /v1/send does,
// with the holds of app.PrepareReply and app.PrepareForward. Reads by an
// agent key, or carrying an intent, are written to the audit log too:
// what an agent read is what it may have been told.

type receivedAuthView struct {
	SPF         string `json:"spf"`
	DKIM        string `json:"dkim"`
	DMARC       string `json:"dmarc"`
	DMARCFailed bool   `json:"dmarc_failed"`
}

type receivedAttachmentView struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
	Inline      bool   `json:"inline"`
}

// receivedView is a received message without its bodies (the list).
type receivedView struct {
	ID          string                   `json:"id"`
	Object      string                   `json:"object"`
	MailboxID   string                   `json:"mailbox_id"`
	ThreadID    string                   `json:"thread_id"`
	MessageID   *string                  `json:"message_id"`
	From        string                   `json:"from"`
	To          []string                 `json:"to"`
	Cc          []string                 `json:"cc"`
	ReplyTo     []string                 `json:"reply_to"`
	Subject     string                   `json:"subject"`
	Date        *string                  `json:"date"`
	ReceivedAt  string                   `json:"received_at"`
	Size        int                      `json:"size"`
	Read        bool                     `json:"read"`
	SendID      *string                  `json:"send_id"`
	Auth        receivedAuthView         `json:"authentication"`
	Attachments []receivedAttachmentView `json:"attachments"`
}

// receivedDetail is one received message with its bodies.
type receivedDetail struct {
	receivedView
	Text string `json:"text"`
	HTML string `json:"html"`
}

func viewReceived(m *core.ReceivedMessage) receivedView {
	v := receivedView{ID: m.ID, Object: "received_message", MailboxID: m.MailboxID, ThreadID: m.ThreadID,
		MessageID: optString(m.MessageID), From: m.From, To: list(m.To), Cc: list(m.Cc), ReplyTo: list(m.ReplyTo),
		Subject: m.Subject, Date: optTime(m.Date), ReceivedAt: rfc3339(m.ReceivedAt), Size: m.Size, Read: m.Read,
		SendID: optString(m.SendID), Attachments: []receivedAttachmentView{},
		Auth: receivedAuthView{SPF: m.Auth.SPF, DKIM: m.Auth.DKIM, DMARC: m.Auth.DMARC, DMARCFailed: m.Auth.DMARCFailed}}
	for _, a := range m.Attachments {
		v.Attachments = append(v.Attachments, receivedAttachmentView{ID: a.ID, Filename: a.Filename,
			ContentType: a.ContentType, Size: a.Size, Inline: a.Disposition == "inline"})
	}
	return v
}

// handleListReceived is GET /v1/received (scope read): the received
// messages the key may see, newest first, ?mailbox_id=&thread_id=&from=
// &limit=&after=.
func (s *Server) handleListReceived(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	f := core.ReceivedFilter{ThreadID: q.Get("thread_id"), Limit: limit, After: q.Get("after")}
	if mb := q.Get("mailbox_id"); mb != "" {
		f.MailboxIDs = []string{mb}
	}
	if from := q.Get("from"); from != "" {
		if f.From, err = recipientParam(from); err != nil {
			writeError(w, r, s.logger, core.Errorf(core.CodeValidation, "from", "from must be an email address"))
			return
		}
	}
	ms, more, err := s.svc.ListReceived(r.Context(), key, f)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listView[receivedView]{Object: "list", Data: make([]receivedView, 0, len(ms))}
	ids := make([]string, 0, len(ms))
	for _, m := range ms {
		out.Data = append(out.Data, viewReceived(m))
		ids = append(ids, m.ID)
	}
	if more && len(ms) > 0 {
		out.Next = optString(ms[len(ms)-1].ID)
	}
	s.auditRead(r, key, strings.Join(ids, ","))
	writeJSON(w, http.StatusOK, out)
}

// handleGetReceived is GET /v1/received/{id} (scope read).
func (s *Server) handleGetReceived(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	m, err := s.svc.ReceivedMessage(r.Context(), key, r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	s.auditRead(r, key, m.ID)
	writeJSON(w, http.StatusOK, receivedDetail{receivedView: viewReceived(m), Text: m.Text, HTML: m.HTML})
}

// auditRead writes a read by an agent key, or one carrying an intent, to
// the audit log: outcome "read", the ids read in detail.
func (s *Server) auditRead(r *http.Request, key *core.APIKey, ids string) {
	intent, err := intentFrom(r.Header)
	if err != nil {
		intent = "" // a read is answered either way; the header is not trusted
	}
	if !key.Agent && intent == "" {
		return
	}
	e := &core.AuditEntry{Tenant: key.Tenant, APIKeyID: key.ID, Route: r.Method + " " + r.URL.Path,
		Intent: intent, Status: http.StatusOK, Outcome: "read", Detail: ids}
	ctx := context.WithoutCancel(r.Context())
	if err := s.svc.RecordAudit(ctx, e); err != nil {
		s.logger.ErrorContext(ctx, "write audit entry", "error", err)
	}
}

// replyRequest is the body of POST /v1/received/{id}/reply.
type replyRequest struct {
	ReplyAll bool     `json:"reply_all"`
	To       addrList `json:"to"`
	Cc       addrList `json:"cc"`
	Text     string   `json:"text"`
	HTML     string   `json:"html"`
}

func (s *Server) handleReplyReceived(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (writeStep, error) {
	var req replyRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := checkRecipientCounts(req.To, req.Cc, nil, nil); err != nil {
		return nil, err
	}
	send, err := s.svc.PrepareReply(ctx, key, idemKey, r.PathValue("id"), app.ReplyParams{
		ReplyAll: req.ReplyAll, To: req.To, Cc: req.Cc, Text: req.Text, HTML: req.HTML})
	if err != nil {
		return nil, err
	}
	return s.acceptStep(key, send), nil
}

// forwardRequest is the body of POST /v1/received/{id}/forward.
type forwardRequest struct {
	To   addrList `json:"to"`
	Cc   addrList `json:"cc"`
	Note string   `json:"note"`
}

func (s *Server) handleForwardReceived(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (writeStep, error) {
	var req forwardRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := checkRecipientCounts(req.To, req.Cc, nil, nil); err != nil {
		return nil, err
	}
	send, err := s.svc.PrepareForward(ctx, key, idemKey, r.PathValue("id"), app.ForwardParams{
		To: req.To, Cc: req.Cc, Note: req.Note})
	if err != nil {
		return nil, err
	}
	return s.acceptStep(key, send), nil
}
