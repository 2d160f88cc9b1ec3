package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// What the native receiving routes add for agents (docs/agents.md,
// "Reading mail"): what an agent read is what it may have been told, so
// its reads are in the audit log; a reply of its outside the thread and
// its forwards wait for a person (app.PrepareReply, app.PrepareForward).

// forwardRequest is the body of POST /v1/received/{id}/forward.
type forwardRequest struct {
	To   kit.AddrList `json:"to"`
	Cc   kit.AddrList `json:"cc"`
	Text string       `json:"text"`
	HTML string       `json:"html"`
}

// handleForwardReceived is POST /v1/received/{id}/forward: the message as
// received, attached whole, idempotent like every send; an agent's is
// held unless its key's allowlist covers every recipient.
func (s *Server) handleForwardReceived(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (kit.WriteStep, error) {
	var req forwardRequest
	if err := kit.DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := kit.CheckRecipientCounts(req.To, req.Cc, nil, nil); err != nil {
		return nil, err
	}
	sr := &app.SendRequest{To: req.To, Cc: req.Cc, Text: req.Text, HTML: req.HTML}
	send, err := s.Svc.PrepareForward(ctx, key, idemKey, r.PathValue("id"), app.Guarded(key, kit.AgentAsked(r)), sr)
	if err != nil {
		return nil, err
	}
	return s.AcceptStep(key, send, kit.NativeSendView), nil
}
