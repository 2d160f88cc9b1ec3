package app

import (
	"context"

	"github.com/sendonce/sendonce/internal/core"
)

// The answers of the person at an agent's side, asked through MCP
// elicitation (docs/agents.md, "Approval where the person is").
const (
	ElicitAccept  = "accept"
	ElicitDecline = "decline"
	ElicitCancel  = "cancel"
)

// DecideByElicitation records the answer of the person at an agent's side
// to a send that waits for approval: accept queues it, decline and cancel
// cancel it. Only the agent key that made the send relays the answer (its
// MCP server asked the person; the model has no tool that reaches this),
// and only while the send waits: any other key, or another key's send, is
// 404, and a send already decided is 409 invalid_state.
func (s *Service) DecideByElicitation(ctx context.Context, tx core.Tx, key *core.APIKey, id, action string) (*core.Send, error) {
	if !key.Agent {
		return nil, core.Errorf(core.CodeForbidden, "", "only an agent key relays its person's answer; other keys approve with POST /v1/sends/{id}/approve")
	}
	owner, err := tx.SendAPIKey(ctx, id)
	if err != nil {
		return nil, err
	}
	if owner != key.ID {
		return nil, core.ErrNotFound
	}
	switch action {
	case ElicitAccept:
		return s.transition(ctx, tx, key.Tenant, id, core.StatusPendingApproval, core.StatusQueued, core.EventApproved,
			"approved by the person at the agent's side (elicitation)")
	case ElicitDecline, ElicitCancel:
		return s.transition(ctx, tx, key.Tenant, id, core.StatusPendingApproval, core.StatusCanceled, core.EventCanceled,
			action+" by the person at the agent's side (elicitation)")
	}
	return nil, core.Errorf(core.CodeValidation, "action", "action must be accept, decline or cancel")
}
