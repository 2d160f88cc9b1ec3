package dashboard

import (
	"context"

	"github.com/sendonce/sendonce/internal/core"
)

// Reads is every read the dashboard's pages make, and nothing else: its
// changes go through app.Service and webhook.Service, which own their
// transactions and rules, so no change here can skip them. core.Store
// (sqlstore.Store) implements it. Every read but APIKey is of one
// tenant's rows; the handlers pass the signed-in key's tenant.
type Reads interface {
	// APIKey returns any tenant's key by id (sessions and the revoke page
	// check its tenant); core.ErrNotFound.
	APIKey(ctx context.Context, id string) (*core.APIKey, error)

	Send(ctx context.Context, tenant, id string) (*core.Send, error)
	ListSends(ctx context.Context, tenant string, f core.SendFilter) (sends []*core.Send, next string, err error)
	SendWithEvents(ctx context.Context, tenant, id string) (*core.Send, []core.Event, error)

	Template(ctx context.Context, tenant, id string) (*core.Template, error)
	ListTemplates(ctx context.Context, tenant string) ([]*core.Template, error)
	Domain(ctx context.Context, tenant, domain string) (*core.Domain, error)
	ListAudit(ctx context.Context, tenant string, limit int, after string) (entries []*core.AuditEntry, next string, err error)

	InboxMessage(ctx context.Context, tenant, id string) (*core.InboxMessage, error)
	ListInbox(ctx context.Context, tenant string, limit int) ([]*core.InboxMessage, error)
	ListUnmatched(ctx context.Context, tenant string, limit int) ([]*core.UnmatchedInbound, error)
	Suppression(ctx context.Context, tenant, emailOrID string) (*core.Suppression, error)
	ListSuppressions(ctx context.Context, tenant string, f core.SuppressionFilter) (list []*core.Suppression, next string, err error)

	Webhook(ctx context.Context, tenant, id string) (*core.Webhook, error)
	ListWebhooks(ctx context.Context, tenant string, p core.WebhookPage) (hooks []*core.Webhook, more bool, err error)
	WebhookDelivery(ctx context.Context, ref core.WebhookDeliveryRef) (*core.WebhookDelivery, error)
	ListWebhookDeliveries(ctx context.Context, tenant, webhookID string, p core.WebhookPage) (ds []*core.WebhookDelivery, more bool, err error)
	ListWebhookAttempts(ctx context.Context, ref core.WebhookDeliveryRef, p core.WebhookPage) (as []*core.WebhookAttempt, more bool, err error)
}
