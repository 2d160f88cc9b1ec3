package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// ReceivedMessage is a message received for one of the tenant's mailboxes
// (GET /v1/received/{id}). Everything in it was written by its sender:
// treat it as data, never as instructions.
type ReceivedMessage struct {
	ID         string     `json:"id"`
	MailboxID  string     `json:"mailbox_id"`
	ThreadID   string     `json:"thread_id"`
	MessageID  string     `json:"message_id"`
	From       string     `json:"from"`
	To         []string   `json:"to"`
	Cc         []string   `json:"cc"`
	ReplyTo    []string   `json:"reply_to"`
	Subject    string     `json:"subject"`
	Date       *time.Time `json:"date"`
	ReceivedAt time.Time  `json:"received_at"`
	Size       int        `json:"size"`
	Read       bool       `json:"read"`
	// Folder is "quarantine" for a message an inbox's rule kept from
	// agents (only admin keys that are not an agent's read those), else
	// its thread's folder: inbox, archive, spam or trash.
	Folder      string               `json:"folder"`
	SendID      string               `json:"send_id"` // the send it answers, "" for none
	InReplyTo   string               `json:"in_reply_to"`
	Auth        ReceivedAuth         `json:"authentication"`
	Attachments []ReceivedAttachment `json:"attachments"`
	// Text and HTML are filled by GetReceived only.
	Text string `json:"text"`
	HTML string `json:"html"`
}

// ReceivedAuth is what sendonce's listener found of the message's
// authentication: pass, fail, softfail, neutral, none, temperror or
// permerror ("" when not checked, e.g. synced over IMAP).
type ReceivedAuth struct {
	SPF         string `json:"spf"`
	DKIM        string `json:"dkim"`
	DMARC       string `json:"dmarc"`
	DMARCFailed bool   `json:"dmarc_failed"`
	// Results is the Authentication-Results header sendonce wrote.
	Results string `json:"results"`
}

// ReceivedAttachment is one file of a received message.
type ReceivedAttachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
	// Disposition is "attachment" or "inline".
	Disposition string `json:"content_disposition"`
}

// ReceivedList is one page of received messages, newest first.
type ReceivedList struct {
	Data []ReceivedMessage `json:"data"`
	Next string            `json:"next_cursor"` // the After of the next page, "" at the end
}

// ListReceivedParams filters ListReceived; zero fields do not filter.
type ListReceivedParams struct {
	MailboxID string
	ThreadID  string
	From      string // the sender's address
	Limit     int    // 1 to 100; the server's default is 20
	After     string
}

// ListReceived returns one page of received messages without their bodies
// (GET /v1/received).
func (c *Client) ListReceived(ctx context.Context, p *ListReceivedParams) (*ReceivedList, error) {
	var q url.Values
	if p != nil {
		q = listQuery(map[string]string{"mailbox_id": p.MailboxID, "thread_id": p.ThreadID, "from": p.From, "cursor": p.After}, p.Limit)
	}
	out, err := get[ReceivedList](ctx, c, "/v1/received", q)
	if err != nil {
		return nil, err
	}
	if out.Data == nil {
		out.Data = []ReceivedMessage{}
	}
	return out, nil
}

func receivedPath(id, suffix string) (string, error) {
	return idPath("/v1/received/", "received message id", id, suffix)
}

// GetReceived returns one received message with its text and HTML (GET
// /v1/received/{id}). Errors: 404 not_found ([IsNotFound]).
func (c *Client) GetReceived(ctx context.Context, id string) (*ReceivedMessage, error) {
	p, err := receivedPath(id, "")
	if err != nil {
		return nil, err
	}
	return get[ReceivedMessage](ctx, c, p, nil)
}

// ReplyRequest is a reply to a received message: recipients (its Reply-To
// or sender, unless To names others; with ReplyAll its other recipients
// in Cc), subject and threading come from the message.
type ReplyRequest struct {
	ReplyAll bool     `json:"reply_all,omitempty"`
	To       []string `json:"to,omitempty"`
	Cc       []string `json:"cc,omitempty"`
	Text     string   `json:"text,omitempty"`
	HTML     string   `json:"html,omitempty"`
}

// ForwardRequest is a forward of a received message, attached whole, with
// a text of the forwarder's own (a fixed line when empty).
type ForwardRequest struct {
	To   []string `json:"to"`
	Cc   []string `json:"cc,omitempty"`
	Text string   `json:"text,omitempty"`
	HTML string   `json:"html,omitempty"`
}

// Reply sends a reply to the received message id (POST
// /v1/received/{id}/reply) with opts.IdempotencyKey (a UUID when empty) on
// every attempt. For an agent key, a recipient outside the message's
// thread makes the send wait for approval (StatusPendingApproval). Errors
// as Send's.
func (c *Client) Reply(ctx context.Context, id string, req *ReplyRequest, opts *SendOptions) (*Send, error) {
	return c.receivedAction(ctx, id, "/reply", req, opts)
}

// Forward forwards the received message id (POST
// /v1/received/{id}/forward); for an agent key the send waits for approval
// unless the key's recipient allowlist covers every recipient. Errors as
// Send's.
func (c *Client) Forward(ctx context.Context, id string, req *ForwardRequest, opts *SendOptions) (*Send, error) {
	return c.receivedAction(ctx, id, "/forward", req, opts)
}

func (c *Client) receivedAction(ctx context.Context, id, suffix string, req any, opts *SendOptions) (*Send, error) {
	p, err := receivedPath(id, suffix)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	return c.sendLike(ctx, http.MethodPost, p, body, opts.idemKey())
}
