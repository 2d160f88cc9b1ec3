package mcpserver

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sendonce/sendonce/client"
)

// Approval where the person is: a send the server holds for approval
// (an agent key that requires it, a reply outside the thread, a forward)
// is put to the person at the agent's side when their MCP client can
// elicit. The question goes to the person, not to the model; the answer
// goes to the server through the agent key (POST
// /v1/sends/{id}/elicitation), which no tool exposes to the model. A client
// that cannot elicit, or a person who does not answer, leaves the send
// pending_approval for the dashboard.

const approveInput = "approve_send"

// maxPreviewRunes bounds the text shown in the question.
const maxPreviewRunes = 600

// askApproval asks the person about out's held send and relays the answer;
// out is returned as is when nothing waits or the client cannot elicit.
func (s *Server) askApproval(ctx context.Context, req *mcp.CallToolRequest, out SendOutput, text string) (*mcp.CallToolResult, SendOutput, error) {
	if !out.AwaitingApproval || out.Send == nil || !supportsElicitation(req) {
		return nil, out, nil
	}
	ans, ok := req.Params.InputResponses[approveInput].(*mcp.ElicitResult)
	if !ok {
		// Multi round trip, as for confirm_send: the host asks and calls
		// again with the answer (the SDK does it for older hosts).
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{approveInput: approvalParams(out.Send, text)}}, SendOutput{}, nil
	}
	action := "decline"
	if yes, _ := ans.Content["approve"].(bool); ans.Action == "accept" && yes {
		action = "accept"
	} else if ans.Action == "cancel" {
		action = "cancel"
	}
	// One key per send: a lost answer retried is the same decision.
	sent, err := s.c.Elicited(ctx, out.Send.ID, action, &client.CallOptions{IdempotencyKey: "elicitation-" + out.Send.ID})
	if err != nil {
		out.Error = apiErr(err)
		out.Note = "The person's answer could not be recorded; the send still waits for approval on the dashboard."
		return &mcp.CallToolResult{IsError: true}, out, nil
	}
	out.Send, out.AwaitingApproval = sendInfo(sent), sent.Status == client.StatusPendingApproval
	if action == "accept" {
		out.Outcome, out.Note = "approved", "The person approved; the send is queued."
	} else {
		out.Outcome, out.Note = "declined", "The person declined; nothing was sent."
	}
	return nil, out, nil
}

// approvalParams is the question: who it goes to, its subject and the start
// of its text, shown to the person only.
func approvalParams(send *SendInfo, text string) *mcp.ElicitParams {
	var b strings.Builder
	b.WriteString("An email from your agent waits for your approval.\nFrom: " + send.From + "\nTo: " + joinAddrs(send.To))
	if len(send.Cc) > 0 {
		b.WriteString("\nCc: " + joinAddrs(send.Cc))
	}
	b.WriteString("\nSubject: " + send.Subject)
	if text = strings.TrimSpace(text); text != "" {
		if utf8.RuneCountInString(text) > maxPreviewRunes {
			text = string([]rune(text)[:maxPreviewRunes]) + "…"
		}
		b.WriteString("\n\n" + text)
	}
	return &mcp.ElicitParams{
		Message: b.String(),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "description": "send it"},
			},
			"required": []string{"approve"},
		},
	}
}
