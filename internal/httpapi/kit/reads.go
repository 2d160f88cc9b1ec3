package kit

import (
	"context"

	"github.com/sendonce/sendonce/internal/core"
)

// Reads is what the API lists and shows, read outside any transaction:
// exactly the reads of core.Store the handlers use, which core.Store
// satisfies. Every change goes through app.Service (or webhook.Service),
// so the API is never handed the store: a door holding it could write
// without the rules the services apply.
type Reads interface {
	Ping(ctx context.Context) error

	Send(ctx context.Context, tenant, id string) (*core.Send, error)
	SendWithEvents(ctx context.Context, tenant, id string) (*core.Send, []core.Event, error)
	SendAttachments(ctx context.Context, id string) ([]core.Attachment, error)
	ListSends(ctx context.Context, tenant string, f core.SendFilter) (sends []*core.Send, next string, err error)

	Template(ctx context.Context, tenant, id string) (*core.Template, error)
	ListTemplates(ctx context.Context, tenant string) ([]*core.Template, error)
	ListMailboxes(ctx context.Context, tenant string) ([]*core.Mailbox, error)

	InboxMessage(ctx context.Context, tenant, id string) (*core.InboxMessage, error)
	ListInbox(ctx context.Context, tenant string, limit int) ([]*core.InboxMessage, error)
	ListUnmatched(ctx context.Context, tenant string, limit int) ([]*core.UnmatchedInbound, error)

	Suppression(ctx context.Context, tenant, emailOrID string) (*core.Suppression, error)
	ListSuppressions(ctx context.Context, tenant string, f core.SuppressionFilter) (list []*core.Suppression, next string, err error)
	ListAudit(ctx context.Context, tenant string, limit int, after string) (entries []*core.AuditEntry, next string, err error)

	Webhook(ctx context.Context, tenant, id string) (*core.Webhook, error)
	ListWebhooks(ctx context.Context, tenant string, p core.WebhookPage) (hooks []*core.Webhook, more bool, err error)
	ListWebhookDeliveries(ctx context.Context, tenant, webhookID string, p core.WebhookPage) (ds []*core.WebhookDelivery, more bool, err error)
	WebhookDelivery(ctx context.Context, ref core.WebhookDeliveryRef) (*core.WebhookDelivery, error)
	ListWebhookAttempts(ctx context.Context, ref core.WebhookDeliveryRef, p core.WebhookPage) (as []*core.WebhookAttempt, more bool, err error)
}
