package client

import (
	"context"
	"net/http"
)

// Preview is what POST /v1/send would accept for a request: the message
// rendered (template applied, From resolved), not sent.
type Preview struct {
	MailboxID  string   `json:"mailbox_id"`
	From       string   `json:"from"`
	To         []string `json:"to"`
	Cc         []string `json:"cc"`
	Bcc        []string `json:"bcc"`
	ReplyTo    []string `json:"reply_to"`
	Subject    string   `json:"subject"`
	Text       string   `json:"text"`
	HTML       string   `json:"html"`
	TemplateID string   `json:"template_id"` // "" when none
	// RequiresApproval: the key's sends wait in pending_approval.
	RequiresApproval bool `json:"requires_approval"`
}

// PreviewSend renders req as POST /v1/send would (POST /v1/send/preview),
// with the same validation and the same guardrails of the key (caps
// aside), and writes nothing. Errors: as Send's (422 validation_error, 403
// forbidden), never stored under any key.
func (c *Client) PreviewSend(ctx context.Context, req *SendRequest) (*Preview, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	p, _, err := callFor[Preview](ctx, c, request{method: http.MethodPost, path: "/v1/send/preview", body: body})
	return p, err
}
