package client

import (
	"context"
	"net/http"
	"time"
)

// Draft is a message kept unsent (POST /v1/drafts): an agent writes it, a
// person reads and edits it, and sending it is one send however often and
// by whomever it is sent, under the IdempotencyKey fixed at creation.
type Draft struct {
	ID     string `json:"id"`
	Status string `json:"status"` // "draft", or "sent" once it became a send
	Type   string `json:"type"`   // "new" or "reply"
	// InReplyTo and ThreadID name a reply draft's received message and
	// its thread ("" for a new message).
	InReplyTo      string    `json:"in_reply_to"`
	ThreadID       string    `json:"thread_id"`
	IdempotencyKey string    `json:"idempotency_key"`
	SendID         string    `json:"send_id"` // "" until sent
	MailboxID      string    `json:"mailbox_id"`
	From           string    `json:"from"`
	To             []string  `json:"to"`
	Cc             []string  `json:"cc"`
	Bcc            []string  `json:"bcc"`
	Subject        string    `json:"subject"`
	Text           string    `json:"text"`
	HTML           string    `json:"html"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// DraftRequest is a draft to create: a new message, or with InReplyTo a
// reply to that received message (recipients, subject and threading come
// from it unless set here). Every field may be left empty until it is sent.
type DraftRequest struct {
	InReplyTo string   `json:"in_reply_to,omitempty"`
	ReplyAll  bool     `json:"reply_all,omitempty"`
	MailboxID string   `json:"mailbox_id,omitempty"`
	From      string   `json:"from,omitempty"`
	To        []string `json:"to,omitempty"`
	Cc        []string `json:"cc,omitempty"`
	Bcc       []string `json:"bcc,omitempty"`
	Subject   string   `json:"subject,omitempty"`
	Text      string   `json:"text,omitempty"`
	HTML      string   `json:"html,omitempty"`
}

// DraftUpdate changes the fields it sets (nil leaves one as it is).
type DraftUpdate struct {
	To      *[]string `json:"to,omitempty"`
	Cc      *[]string `json:"cc,omitempty"`
	Bcc     *[]string `json:"bcc,omitempty"`
	Subject *string   `json:"subject,omitempty"`
	Text    *string   `json:"text,omitempty"`
	HTML    *string   `json:"html,omitempty"`
}

func draftPath(id, suffix string) (string, error) {
	return idPath("/v1/drafts/", "draft id", id, suffix)
}

// CreateDraft creates a draft (POST /v1/drafts) with opts.IdempotencyKey
// (a UUID when empty) on every attempt.
func (c *Client) CreateDraft(ctx context.Context, req *DraftRequest, opts *SendOptions) (*Draft, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	d, _, err := postFor[Draft](ctx, c, "/v1/drafts", body, opts.idemKey())
	return d, err
}

// GetDraft returns a draft (GET /v1/drafts/{id}).
func (c *Client) GetDraft(ctx context.Context, id string) (*Draft, error) {
	p, err := draftPath(id, "")
	if err != nil {
		return nil, err
	}
	return get[Draft](ctx, c, p, nil)
}

// UpdateDraft changes an unsent draft (PATCH /v1/drafts/{id}). Errors:
// 409 invalid_state once it was sent.
func (c *Client) UpdateDraft(ctx context.Context, id string, u *DraftUpdate) (*Draft, error) {
	p, err := draftPath(id, "")
	if err != nil {
		return nil, err
	}
	d, _, err := callWith[Draft](ctx, c, http.MethodPatch, p, u)
	return d, err
}

// SendDraft sends a draft (POST /v1/drafts/{id}/send). The server sends it
// under the draft's own key whatever the call carries, so every call, and
// every retry, answers the one send it became (Replayed after the first).
func (c *Client) SendDraft(ctx context.Context, id string) (*Send, error) {
	p, err := draftPath(id, "/send")
	if err != nil {
		return nil, err
	}
	return c.sendLike(ctx, http.MethodPost, p, nil, "draft:"+id)
}
