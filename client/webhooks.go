package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/webhooksig"
)

// Webhook is an endpoint that gets the tenant's send events.
type Webhook struct {
	ID       string   `json:"id"`
	Endpoint string   `json:"endpoint"`
	Events   []string `json:"events"`
	Status   string   `json:"status"` // "enabled" or "disabled"
	// SigningSecret ("whsec_…") is set only in the answers of
	// CreateWebhook and RotateWebhookSecret: store it then.
	SigningSecret string `json:"signing_secret,omitempty"`
	// DisabledReason says why the server disabled it (a 410, or too many
	// failed deliveries in a row).
	DisabledReason string    `json:"disabled_reason,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// WebhookParams creates a webhook: an http(s) endpoint and the event types
// ("email.sent", "email.bounced", …) it wants.
type WebhookParams struct {
	Endpoint string   `json:"endpoint"`
	Events   []string `json:"events"`
}

// WebhookUpdate changes a webhook; nil fields stay as they are.
type WebhookUpdate struct {
	Endpoint *string   `json:"endpoint,omitempty"`
	Events   *[]string `json:"events,omitempty"`
	Status   *string   `json:"status,omitempty"`
}

// WebhookDelivery is one event sent (or to send) to one endpoint. ID is
// the event's id and the webhook-id header of every attempt.
type WebhookDelivery struct {
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	EmailID       string          `json:"email_id"`
	CreatedAt     time.Time       `json:"created_at"`
	Status        string          `json:"status"` // pending, attempting, success, failed
	Attempts      int             `json:"attempts"`
	NextAttemptAt *time.Time      `json:"next_attempt_at"`
	Payload       json.RawMessage `json:"payload,omitempty"` // GetWebhookDelivery only
}

// WebhookAttempt is one HTTP request of a delivery.
type WebhookAttempt struct {
	ID             string    `json:"id"`
	HTTPStatusCode int       `json:"http_status_code"` // 0 without a response
	Response       string    `json:"response"`
	Error          string    `json:"error,omitempty"`
	SentAt         time.Time `json:"sent_at"`
	DurationMS     int64     `json:"duration_ms"`
}

// Page selects a page of a list: Limit 1 to 100 (0: the server's 20),
// After a cursor (the previous page's Next).
type Page struct {
	Limit int
	After string
}

func (p *Page) query() url.Values {
	if p == nil {
		return url.Values{}
	}
	return listQuery(map[string]string{"after": p.After}, p.Limit)
}

// listQuery is a list call's query string: the filters that are set, and
// the limit when it is positive (else the server's default applies).
func listQuery(filters map[string]string, limit int) url.Values {
	q := url.Values{}
	for k, v := range filters {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

// List is a page of a list; Next is the cursor of the next one, "" on the
// last.
type List[T any] struct {
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
	Next    string `json:"next"`
}

func webhookPath(id string, rest ...string) (string, error) {
	p, err := idPath("/v1/webhooks/", "webhook id", id, "")
	if err != nil {
		return "", err
	}
	for _, r := range rest {
		if r == "" {
			return "", fmt.Errorf("%w: empty event id", ErrInvalidRequest)
		}
		p += "/" + r
	}
	return p, nil
}

// postKeyed POSTs body to path under key (keyOrNew) and decodes the
// answer into v.
func (c *Client) postKeyed(ctx context.Context, path string, body []byte, key string, v any) (*response, error) {
	key, err := keyOrNew(key)
	if err != nil {
		return nil, err
	}
	return c.call(ctx, request{method: http.MethodPost, path: path, body: body, key: key}, v)
}

// postFor is postKeyed decoding the answer into a new T, as callFor.
func postFor[T any](ctx context.Context, c *Client, path string, body []byte, key string) (*T, *response, error) {
	var v T
	resp, err := c.postKeyed(ctx, path, body, key, &v)
	if err != nil {
		return nil, nil, err
	}
	return &v, resp, nil
}

// CreateWebhook creates a webhook (POST /v1/webhooks); the answer's
// SigningSecret is shown only now. Every attempt carries the same
// Idempotency-Key (opts', or one made for the call). Needs the admin scope.
// Errors: 422 validation_error (param endpoint: not http(s), too long, or
// private without --webhook-allow-private; param events).
func (c *Client) CreateWebhook(ctx context.Context, p *WebhookParams, opts *CallOptions) (*Webhook, error) {
	body, err := jsonBody(p)
	if err != nil {
		return nil, err
	}
	w, _, err := postFor[Webhook](ctx, c, "/v1/webhooks", body, opts.idemKey())
	return w, err
}

// GetWebhook returns a webhook (without its secret). Errors: 404 not_found.
func (c *Client) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	path, err := webhookPath(id)
	if err != nil {
		return nil, err
	}
	return get[Webhook](ctx, c, path, nil)
}

// ListWebhooks returns a page of the tenant's webhooks, newest first.
func (c *Client) ListWebhooks(ctx context.Context, p *Page) (*List[Webhook], error) {
	return get[List[Webhook]](ctx, c, "/v1/webhooks", p.query())
}

// UpdateWebhook changes a webhook (PATCH, retried like a GET: applying the
// same change twice is the same change). Errors: 404, 422.
func (c *Client) UpdateWebhook(ctx context.Context, id string, u *WebhookUpdate) (*Webhook, error) {
	path, err := webhookPath(id)
	if err != nil {
		return nil, err
	}
	w, _, err := callWith[Webhook](ctx, c, http.MethodPatch, path, u)
	return w, err
}

// DeleteWebhook deletes a webhook with its deliveries. Errors: 404
// not_found (also on a retry whose first attempt deleted it).
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	path, err := webhookPath(id)
	if err != nil {
		return err
	}
	_, err = c.call(ctx, request{method: http.MethodDelete, path: path}, nil)
	return err
}

// RotateWebhookSecret gives the webhook a new signing secret, returned in
// SigningSecret (shown only now).
func (c *Client) RotateWebhookSecret(ctx context.Context, id string, opts *CallOptions) (*Webhook, error) {
	path, err := webhookPath(id, "signing-secret", "rotate")
	if err != nil {
		return nil, err
	}
	w, _, err := postFor[Webhook](ctx, c, path, nil, opts.idemKey())
	return w, err
}

// ListWebhookDeliveries returns a page of the webhook's deliveries,
// newest first.
func (c *Client) ListWebhookDeliveries(ctx context.Context, id string, p *Page) (*List[WebhookDelivery], error) {
	path, err := webhookPath(id, "events")
	if err != nil {
		return nil, err
	}
	return get[List[WebhookDelivery]](ctx, c, path, p.query())
}

// GetWebhookDelivery returns one delivery with its payload.
func (c *Client) GetWebhookDelivery(ctx context.Context, id, eventID string) (*WebhookDelivery, error) {
	path, err := webhookPath(id, "events", url.PathEscape(eventID))
	if err != nil {
		return nil, err
	}
	return get[WebhookDelivery](ctx, c, path, nil)
}

// ListWebhookAttempts returns a page of a delivery's attempts, newest
// first.
func (c *Client) ListWebhookAttempts(ctx context.Context, id, eventID string, p *Page) (*List[WebhookAttempt], error) {
	path, err := webhookPath(id, "events", url.PathEscape(eventID), "attempts")
	if err != nil {
		return nil, err
	}
	return get[List[WebhookAttempt]](ctx, c, path, p.query())
}

// ReplayWebhookDelivery makes a delivery due now, with the same webhook-id
// and body and a fresh retry schedule. Errors: 404, 409 invalid_state while
// an attempt of it runs.
func (c *Client) ReplayWebhookDelivery(ctx context.Context, id, eventID string, opts *CallOptions) error {
	path, err := webhookPath(id, "events", url.PathEscape(eventID), "replay")
	if err != nil {
		return err
	}
	_, err = c.postKeyed(ctx, path, nil, opts.idemKey(), nil)
	return err
}

// VerifyWebhook checks a delivery sendonce made to your endpoint: headers
// and body exactly as received, secret the webhook's "whsec_…" signing
// secret. The webhook-signature must be an HMAC-SHA256 under the secret
// (Standard Webhooks, v1) and webhook-timestamp within tolerance of now
// (0: five minutes). Receivers should also de-duplicate on webhook-id: a
// delivery comes at least once. The error wraps one of webhooksig's
// Err… values.
func VerifyWebhook(secret string, headers http.Header, body []byte, tolerance time.Duration) error {
	return webhooksig.Verify(secret, headers, body, tolerance, time.Now())
}
