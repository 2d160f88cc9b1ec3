package kit

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

type ListPage[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

func ReceivedFilter(r *http.Request) (core.ReceivedFilter, error) {
	q := r.URL.Query()
	limit, err := ParseLimit(q.Get("limit"))
	if err != nil {
		return core.ReceivedFilter{}, err
	}
	f := core.ReceivedFilter{Limit: limit, After: q.Get("cursor"), ThreadID: q.Get("thread_id"), From: q.Get("from")}
	if v := q.Get("mailbox_id"); v != "" {
		f.MailboxIDs = []string{v}
	}
	for _, p := range []struct {
		name string
		dst  **time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, core.Errorf(core.CodeValidation, p.name, "%s must be an RFC 3339 time", p.name)
			}
			*p.dst = &t
		}
	}
	if f.Folder, err = receivedFolder(q.Get("folder")); err != nil {
		return f, err
	}
	if v := q.Get("has_attachment"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, core.Errorf(core.CodeValidation, "has_attachment", "has_attachment must be true or false")
		}
		f.HasAttachment = &b
	}
	return f, nil
}

// WriteReceivedPage answers a page of received messages under f (or the
// error err the request's filter made), as the native list and Mailera's
// mailbox messages show them, and audits the read.
func (s *Base) WriteReceivedPage(w http.ResponseWriter, r *http.Request, f core.ReceivedFilter, err error) {
	key := APIKeyFrom(r.Context())
	var ms []*core.ReceivedMessage
	var more bool
	if err == nil {
		ms, more, err = s.Svc.ListReceived(r.Context(), key, f)
	}
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	out := ListPage[receivedView]{Data: make([]receivedView, 0, len(ms))}
	ids := make([]string, 0, len(ms))
	for _, m := range ms {
		out.Data = append(out.Data, ViewReceived(m, false))
		ids = append(ids, m.ID)
	}
	if more {
		out.NextCursor = ms[len(ms)-1].ID
	}
	s.AuditRead(r, key, ids...)
	WriteJSON(w, http.StatusOK, out)
}

// AgentAsked reports a request the MCP server made for an agent: it sends
// the intent header on every call. The header only adds the agent rules,
// so a caller gains nothing by leaving it out that its key does not give.
func AgentAsked(r *http.Request) bool { return len(r.Header.Values(IntentHeader)) > 0 }

// AuditRead writes a read of received mail by an agent key, or asked for
// by an agent, to the audit log: outcome "read", the ids read in detail.
func (s *Base) AuditRead(r *http.Request, key *core.APIKey, ids ...string) {
	if !app.Guarded(key, AgentAsked(r)) {
		return
	}
	intent, err := intentFrom(r.Header)
	if err != nil {
		intent = "" // the read is answered and audited either way
	}
	e := &core.AuditEntry{Tenant: key.Tenant, APIKeyID: key.ID, Route: r.Method + " " + r.URL.Path,
		Intent: intent, Status: http.StatusOK, Outcome: "read", Detail: strings.Join(ids, ",")}
	ctx := context.WithoutCancel(r.Context())
	if err := s.Svc.RecordAudit(ctx, e); err != nil {
		s.Logger.ErrorContext(ctx, "write audit entry", slog.Any("error", err))
	}
}

// HoldAgentMail gives a reply or forward made on Resend's inbox routes or
// Mailera's reply_to_id the agent rules of the native routes, so that no
// door lets an agent key mail outside the thread, or forward, without a
// person. r may be nil: then only the key says whether they apply.
func (s *Base) HoldAgentMail(ctx context.Context, key *core.APIKey, r *http.Request, m *core.ReceivedMessage, sr *app.SendRequest, forward bool) error {
	switch {
	case !app.Guarded(key, r != nil && AgentAsked(r)):
		return nil
	case forward:
		app.HoldForward(key, sr)
		return nil
	}
	return s.Svc.HoldOutsideThread(ctx, key, m, sr)
}

// receivedFolder reads GET /v1/received's folder: "" or "inbox" (the
// messages outside the quarantine) or "quarantine".
func receivedFolder(v string) (string, error) {
	switch v {
	case "", core.FolderInbox:
		return "", nil
	case core.FolderQuarantine:
		return core.FolderQuarantine, nil
	}
	return "", core.Errorf(core.CodeValidation, "folder", "folder must be inbox or quarantine")
}
