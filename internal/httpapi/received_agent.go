package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// What the native receiving routes add for agents (docs/agents.md,
// "Reading mail"): what an agent read is what it may have been told, so
// its reads are in the audit log; a reply of its outside the thread and
// its forwards wait for a person (app.PrepareReply, app.PrepareForward).

// agentAsked reports a request the MCP server made for an agent: it sends
// the intent header on every call. The header only adds the agent rules,
// so a caller gains nothing by leaving it out that its key does not give.
func agentAsked(r *http.Request) bool { return len(r.Header.Values(IntentHeader)) > 0 }

// auditRead writes a read of received mail by an agent key, or asked for
// by an agent, to the audit log: outcome "read", the ids read in detail.
func (s *Server) auditRead(r *http.Request, key *core.APIKey, ids ...string) {
	if !app.Guarded(key, agentAsked(r)) {
		return
	}
	intent, err := intentFrom(r.Header)
	if err != nil {
		intent = "" // the read is answered and audited either way
	}
	e := &core.AuditEntry{Tenant: key.Tenant, APIKeyID: key.ID, Route: r.Method + " " + r.URL.Path,
		Intent: intent, Status: http.StatusOK, Outcome: "read", Detail: strings.Join(ids, ",")}
	ctx := context.WithoutCancel(r.Context())
	if err := s.svc.RecordAudit(ctx, e); err != nil {
		s.logger.ErrorContext(ctx, "write audit entry", slog.Any("error", err))
	}
}

// forwardRequest is the body of POST /v1/received/{id}/forward.
type forwardRequest struct {
	To   addrList `json:"to"`
	Cc   addrList `json:"cc"`
	Text string   `json:"text"`
	HTML string   `json:"html"`
}

// handleForwardReceived is POST /v1/received/{id}/forward: the message as
// received, attached whole, idempotent like every send; an agent's is
// held unless its key's allowlist covers every recipient.
func (s *Server) handleForwardReceived(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (writeStep, error) {
	var req forwardRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := checkRecipientCounts(req.To, req.Cc, nil, nil); err != nil {
		return nil, err
	}
	sr := &app.SendRequest{To: req.To, Cc: req.Cc, Text: req.Text, HTML: req.HTML}
	send, err := s.svc.PrepareForward(ctx, key, idemKey, r.PathValue("id"), app.Guarded(key, agentAsked(r)), sr)
	if err != nil {
		return nil, err
	}
	return s.acceptStep(key, send), nil
}

// holdAgentMail gives a reply or forward made on Resend's inbox routes or
// Mailera's reply_to_id the agent rules of the native routes, so that no
// door lets an agent key mail outside the thread, or forward, without a
// person. r may be nil: then only the key says whether they apply.
func (s *Server) holdAgentMail(ctx context.Context, key *core.APIKey, r *http.Request, m *core.ReceivedMessage, sr *app.SendRequest, forward bool) error {
	switch {
	case !app.Guarded(key, r != nil && agentAsked(r)):
		return nil
	case forward:
		app.HoldForward(key, sr)
		return nil
	}
	return s.svc.HoldOutsideThread(ctx, key, m, sr)
}
