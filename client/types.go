package client

import (
	"encoding/json"
	"time"
)

// Status is where a send stands on the server.
type Status string

// The statuses of a send (docs/api.md, "Statuses").
const (
	StatusPendingApproval Status = "pending_approval"
	StatusScheduled       Status = "scheduled"
	StatusQueued          Status = "queued"
	StatusSending         Status = "sending"
	StatusSent            Status = "sent"
	StatusFailed          Status = "failed"
	StatusUnknown         Status = "unknown"
	StatusCanceled        Status = "canceled"
	// Outcomes after the handoff (docs/api.md, "Statuses" and "Suppressions").
	StatusDelivered  Status = "delivered"
	StatusBounced    Status = "bounced"
	StatusComplained Status = "complained"
	StatusSuppressed Status = "suppressed"
)

// SendRequest is the body of POST /v1/send. Empty fields are left out of the
// JSON, so the same request always marshals to the same bytes.
type SendRequest struct {
	// To is required: 1 to 50 RFC 5322 addresses, display names allowed.
	To      []string `json:"to"`
	Cc      []string `json:"cc,omitempty"`
	Bcc     []string `json:"bcc,omitempty"`
	ReplyTo []string `json:"reply_to,omitempty"`
	// From defaults to the mailbox's address.
	From string `json:"from,omitempty"`
	// MailboxID defaults to the "default" mailbox.
	MailboxID string `json:"mailbox_id,omitempty"`
	// Subject, and Text or HTML, are required unless TemplateID is set.
	Subject string `json:"subject,omitempty"`
	Text    string `json:"text,omitempty"`
	HTML    string `json:"html,omitempty"`
	// TemplateID renders a stored template with Variables.
	TemplateID string         `json:"template_id,omitempty"`
	Variables  map[string]any `json:"variables,omitempty"`
	// Headers are extra message headers; sendonce refuses the ones it
	// controls (From, To, Subject, Message-ID, …).
	Headers map[string]string `json:"headers,omitempty"`
	// Tags are free labels kept on the send.
	Tags map[string]string `json:"tags,omitempty"`
	// Attachments are files, at most 20 (the server's --max-message-size
	// bounds the whole message).
	Attachments []Attachment `json:"attachments,omitempty"`
	// ScheduledAt, when set, sends at that time (at most 30 days ahead)
	// instead of at once: the send is StatusScheduled until then.
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
	// Stream is StreamTransactional or StreamBulk; empty: the API key's
	// default, else transactional. Left out of the body when empty, so a
	// request without one is the same request it always was.
	Stream Stream `json:"stream,omitempty"`
	// Unsubscribe gives the message the one-click unsubscribe headers, as
	// every bulk send's has; such a send has one recipient. Left out of
	// the body when false.
	Unsubscribe bool `json:"unsubscribe,omitempty"`
}

// Stream is a send's stream: a tenant's transactional sends are delivered
// before its bulk ones.
type Stream string

const (
	StreamTransactional Stream = "transactional"
	StreamBulk          Stream = "bulk"
)

// Attachment is one file of a send. Content is sent in base64 (as
// encoding/json writes a []byte).
type Attachment struct {
	// Filename is required: no CR, LF, NUL or path separator.
	Filename string `json:"filename"`
	Content  []byte `json:"content"`
	// ContentType defaults on the server from the filename's extension.
	ContentType string `json:"content_type,omitempty"`
	// ContentID makes the file inline: the HTML refers to it as "cid:…".
	ContentID string `json:"content_id,omitempty"`
}

// SendOptions are the per-call options of Send and SendRaw.
type SendOptions struct {
	// IdempotencyKey: 1 to 255 visible ASCII characters, not starting with
	// a '"'. Make it once per logical email, store it, reuse it on every
	// retry. Empty: the client makes a UUID v4 for this call (reported on
	// Send.IdempotencyKey and by IdempotencyKeyOf on failure).
	IdempotencyKey string
}

// CallOptions are the per-call options of the other POSTs (reconcile,
// approve, reject), which the server also treats idempotently.
type CallOptions struct {
	// IdempotencyKey, as in SendOptions; empty makes one per call.
	IdempotencyKey string
}

// Send is the send object.
type Send struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Status         Status            `json:"status"`
	IdempotencyKey string            `json:"idempotency_key"` // "" when the send had none
	MailboxID      string            `json:"mailbox_id"`
	From           string            `json:"from"`
	To             []string          `json:"to"`
	Cc             []string          `json:"cc"`
	Bcc            []string          `json:"bcc"`
	ReplyTo        []string          `json:"reply_to"`
	Subject        string            `json:"subject"`
	TemplateID     string            `json:"template_id"` // "" when none
	MessageID      string            `json:"message_id"`
	Attempts       int               `json:"attempts"`
	LastError      string            `json:"last_error"` // "" when none
	Tags           map[string]string `json:"tags"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	SentAt         *time.Time        `json:"sent_at"`
	// Recipients are each recipient's own outcome.
	Recipients []Recipient `json:"recipients"`
	// ScheduledAt is when a scheduled send is (or was) due; nil for one
	// sent at once. Attachments counts its files.
	ScheduledAt *time.Time `json:"scheduled_at"`
	Attachments int        `json:"attachments"`
	// Stream is the send's stream.
	Stream Stream `json:"stream"`
	// Events is the send's history; only GetSend fills it.
	Events []Event `json:"events,omitempty"`

	// Replayed is true when the server answered with a stored response
	// (header Idempotent-Replayed: true): an earlier attempt or call with
	// the same key had already created this send.
	Replayed bool `json:"-"`
	// Raw is the object exactly as the server sent it.
	Raw json.RawMessage `json:"-"`
}

// Event is one entry of a send's history.
type Event struct {
	// ID is stable ("evt_…"): the webhook-id of the event's webhook
	// deliveries.
	ID     string    `json:"id"`
	Type   string    `json:"type"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail"`
	// Recipient is the address a recipient's event is about, "" otherwise.
	Recipient string `json:"recipient,omitempty"`
}

// Recipient is one recipient's own outcome: queued, sent, delivered,
// delivery_delayed, bounced, complained, suppressed, failed or unknown.
type Recipient struct {
	Email  string `json:"email"`
	Status Status `json:"status"`
	Detail string `json:"detail"` // "" when none
}

// ListSendsParams filters GET /v1/sends. All fields are optional.
type ListSendsParams struct {
	IdempotencyKey string
	Status         Status
	// Limit is 1 to 100; 0 means the server's default (20).
	Limit int
	// After is the Next cursor of the previous page.
	After string
	// Recipient keeps the sends with this address in to, cc or bcc
	// (compared without regard to case).
	Recipient string
}

// SendList is one page of sends, newest first.
type SendList struct {
	Data []Send `json:"data"`
	// Next is the cursor of the following page, "" on the last.
	Next string `json:"next"`
	// Raw is the list object exactly as the server sent it.
	Raw json.RawMessage `json:"-"`
}

// Reconcile outcomes: the only way out of StatusUnknown.
const (
	OutcomeSent   = "sent"
	OutcomeFailed = "failed"
	// OutcomeResend enqueues one more attempt with the same Message-ID.
	OutcomeResend = "resend"
)

// TemplateParams is the body of PUT /v1/templates/{id}. Variables use Go
// template syntax ({{.name}}).
type TemplateParams struct {
	Subject string `json:"subject"`
	HTML    string `json:"html"`
	Text    string `json:"text"`
}

// Template is a stored template.
type Template struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	Subject   string    `json:"subject"`
	Text      string    `json:"text"`
	HTML      string    `json:"html"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Created is true when PutTemplate created it (201), false when it
	// replaced an existing one (200).
	Created bool `json:"-"`
}
