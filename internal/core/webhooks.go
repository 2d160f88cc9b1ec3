package core

import (
	"context"
	"time"
)

// Webhook is a tenant's endpoint for events (docs/webhooks.md).
type Webhook struct {
	ID       string
	Tenant   string
	Endpoint string
	// Events are the "email.…" types it subscribed to.
	Events []string
	Status WebhookStatus
	// Secret is the signing secret as stored (see webhook.SealSecret); it
	// is never shown except in the answers of create and rotate.
	Secret []byte
	// Failures counts its consecutive failed deliveries.
	Failures int
	// DisabledReason says why sendonce disabled it ("" when a caller did,
	// or when it is enabled).
	DisabledReason string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// WebhookStatus is enabled or disabled.
type WebhookStatus string

const (
	WebhookEnabled  WebhookStatus = "enabled"
	WebhookDisabled WebhookStatus = "disabled"
)

// DeliveryStatus is where one event's delivery to one endpoint stands, in
// the words Resend's webhook event log uses.
type DeliveryStatus string

const (
	DeliveryPending    DeliveryStatus = "pending"
	DeliveryAttempting DeliveryStatus = "attempting"
	DeliverySuccess    DeliveryStatus = "success"
	DeliveryFailed     DeliveryStatus = "failed"
)

// WebhookDelivery is one event to one endpoint. EventID is the event's id
// and the webhook-id header of every attempt.
type WebhookDelivery struct {
	WebhookID     string
	EventID       string
	Tenant        string
	SendID        string
	Event         string // the history name (EventSent, …); WebhookType gives its type
	Status        DeliveryStatus
	Tries         int
	NextAttemptAt *time.Time
	LeaseToken    string
	// Body is the JSON payload, built once at the first claim; nil before.
	Body      []byte
	CreatedAt time.Time
	UpdatedAt time.Time
	// TraceParent is the send's Send.TraceParent, filled by a claim that
	// asks for it (WebhookClaim.TraceParents); "" otherwise.
	TraceParent string
}

// WebhookAttempt is one HTTP request of a delivery.
type WebhookAttempt struct {
	ID         string
	WebhookID  string
	EventID    string
	At         time.Time
	HTTPStatus int    // 0 when no response came
	Response   string // the start of the response body
	Error      string // why no response came ("" when one did)
	Duration   time.Duration
}

// WebhookPage selects a page of a list: up to Limit items after the
// cursor After (an id; "" for the first page).
type WebhookPage struct {
	Limit int
	After string
}

// WebhookDeliveryRef names one delivery: an event to one of the tenant's
// endpoints.
type WebhookDeliveryRef struct {
	Tenant    string
	WebhookID string
	EventID   string
}

// WebhookStore reads webhooks and their deliveries. Every read is of one
// tenant's rows; another tenant's id is ErrNotFound.
type WebhookStore interface {
	Webhook(ctx context.Context, tenant, id string) (*Webhook, error)
	// ListWebhooks returns the tenant's webhooks, newest first.
	ListWebhooks(ctx context.Context, tenant string, p WebhookPage) (hooks []*Webhook, more bool, err error)
	// ListWebhookDeliveries returns an endpoint's deliveries, newest first.
	ListWebhookDeliveries(ctx context.Context, tenant, webhookID string, p WebhookPage) (ds []*WebhookDelivery, more bool, err error)
	WebhookDelivery(ctx context.Context, ref WebhookDeliveryRef) (*WebhookDelivery, error)
	// ListWebhookAttempts returns a delivery's attempts, newest first.
	ListWebhookAttempts(ctx context.Context, ref WebhookDeliveryRef, p WebhookPage) (as []*WebhookAttempt, more bool, err error)
}

// WebhookTx changes webhooks inside a transaction.
type WebhookTx interface {
	// InsertWebhook stores a new webhook (and its subscriptions when it is
	// enabled).
	InsertWebhook(ctx context.Context, w *Webhook) error
	// UpdateWebhook writes endpoint, events, status, secret, failures and
	// disabled reason; ErrNotFound for another tenant's or a missing id.
	UpdateWebhook(ctx context.Context, w *Webhook) error
	// WebhookForUpdate reads the tenant's webhook inside the transaction.
	WebhookForUpdate(ctx context.Context, tenant, id string) (*Webhook, error)
	DeleteWebhook(ctx context.Context, tenant, id string) error
	// ReplayWebhookDelivery makes a delivery due at now with a fresh
	// retry schedule, keeping its id and body; ErrNotFound, and
	// CodeInvalidState while an attempt of it runs.
	ReplayWebhookDelivery(ctx context.Context, ref WebhookDeliveryRef, now time.Time) error
}

// WebhookJob is a delivery claimed for one attempt, with what the attempt
// needs of its endpoint.
type WebhookJob struct {
	Delivery *WebhookDelivery
	Endpoint string
	Secret   []byte // as stored
}

// WebhookClaim asks for due deliveries.
type WebhookClaim struct {
	Now, LeaseUntil time.Time
	Token           string
	Limit           int
	// PerEndpoint bounds the attempts running at once to one endpoint,
	// across every process: a slow endpoint cannot take every worker.
	PerEndpoint int
	// PerTenant bounds the attempts running at once for one tenant's
	// endpoints, across every process: one tenant's slow endpoints cannot
	// take every worker either. 0: no bound.
	PerTenant int
	// Build makes a delivery's body from its send and event, at its first
	// claim; the body is kept and sent as it is on every retry.
	Build func(s *Send, e Event, webhookType string) ([]byte, error)
	// TraceParents fills each claimed delivery's TraceParent from its
	// send (one more read per claim): asked for only with tracing on.
	TraceParents bool
}

// WebhookResult is one attempt's outcome, to record while the claim holds.
type WebhookResult struct {
	Job     *WebhookJob
	Attempt WebhookAttempt
	Now     time.Time
	// Success: a 2xx in time. Otherwise NextAttemptAt is the retry's time,
	// nil when the schedule is used up (the delivery failed).
	Success       bool
	NextAttemptAt *time.Time
	// Disable disables the endpoint at once with this reason (a 410).
	Disable string
	// MaxFailures disables the endpoint when this many deliveries in a
	// row failed.
	MaxFailures int
}

// WebhookQueue is the delivery side of the webhook store.
type WebhookQueue interface {
	// ClaimWebhooks takes due deliveries of enabled endpoints (and puts
	// back the ones whose lease ran out).
	ClaimWebhooks(ctx context.Context, c WebhookClaim) ([]*WebhookJob, error)
	// RecordWebhookAttempt writes an attempt and its outcome; it changes
	// the delivery only while the claim's token holds it.
	RecordWebhookAttempt(ctx context.Context, r WebhookResult) error
}
