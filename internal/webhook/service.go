package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/webhooksig"
)

// ServiceConfig is what the webhook use cases need.
type ServiceConfig struct {
	// Policy judges endpoints at create and update (and Worker's at
	// connect time): netpolicy.Policy with "private" added under
	// --webhook-allow-private. nil allows public addresses only.
	Policy *netpolicy.Policy
	// SecretKey (SENDONCE_SECRET_KEY) seals signing secrets; empty keeps
	// them as they are.
	SecretKey string
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Service implements the webhook use cases.
type Service struct {
	store  core.Transactor
	cfg    ServiceConfig
	logger *slog.Logger
}

// NewService returns a Service.
func NewService(store core.Transactor, cfg ServiceConfig, logger *slog.Logger) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, cfg: cfg, logger: logger}
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// newID returns a time-ordered id ("wh_…").
func newID(prefix string) string { return prefix + strings.ToLower(ulid.Make().String()) }

// checkEvents validates a subscription list: at least one, each a webhook
// event type sendonce sends; duplicates are dropped.
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, core.Errorf(core.CodeValidation, "events", "events must name at least one event type (%s)", strings.Join(core.WebhookTypes(), ", "))
	}
	out := make([]string, 0, len(events))
	for _, e := range events {
		if _, ok := core.EventOfWebhookType(e); !ok {
			return nil, core.Errorf(core.CodeValidation, "events", "%q is not an event type sendonce sends (%s)", e, strings.Join(core.WebhookTypes(), ", "))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// Prepare validates a new webhook and makes it, with a new signing secret
// (returned, whsec_…; the webhook holds its stored form). It runs outside
// any transaction (the endpoint's host is looked up); the caller inserts
// the webhook with app.Service.AddWebhook, within the tenant's cap.
func (s *Service) Prepare(ctx context.Context, tenant, endpoint string, events []string) (*core.Webhook, string, error) {
	events, err := checkEvents(events)
	if err != nil {
		return nil, "", err
	}
	if err := CheckEndpoint(endpoint, s.cfg.Policy); err != nil {
		return nil, "", err
	}
	secret, stored, err := s.newSecret()
	if err != nil {
		return nil, "", err
	}
	now := s.now()
	return &core.Webhook{ID: newID("wh_"), Tenant: tenant, Endpoint: endpoint, Events: events, Status: core.WebhookEnabled,
		Secret: stored, CreatedAt: now, UpdatedAt: now}, secret, nil
}

func (s *Service) newSecret() (secret string, stored []byte, err error) {
	if secret, err = webhooksig.NewSecret(); err != nil {
		return "", nil, err
	}
	if stored, err = SealSecret(secret, s.cfg.SecretKey); err != nil {
		return "", nil, err
	}
	return secret, stored, nil
}

// Patch is an update: nil fields stay as they are.
type Patch struct {
	Endpoint *string
	Events   *[]string
	Status   *string
}

// CheckPatch validates an update outside the transaction.
func (s *Service) CheckPatch(ctx context.Context, p *Patch) error {
	if p.Endpoint != nil {
		if err := CheckEndpoint(*p.Endpoint, s.cfg.Policy); err != nil {
			return err
		}
	}
	if p.Events != nil {
		ev, err := checkEvents(*p.Events)
		if err != nil {
			return err
		}
		*p.Events = ev
	}
	if p.Status != nil && *p.Status != string(core.WebhookEnabled) && *p.Status != string(core.WebhookDisabled) {
		return core.Errorf(core.CodeValidation, "status", "status is enabled or disabled")
	}
	return nil
}

// Update applies a checked patch. Enabling a webhook starts its run of
// failures afresh.
func (s *Service) Update(ctx context.Context, tenant, id string, p Patch) (*core.Webhook, error) {
	var w *core.Webhook
	err := s.store.InTx(ctx, func(tx core.Tx) error {
		var err error
		if w, err = tx.WebhookForUpdate(ctx, tenant, id); err != nil {
			return err
		}
		if p.Endpoint != nil {
			w.Endpoint = *p.Endpoint
		}
		if p.Events != nil {
			w.Events = *p.Events
		}
		if p.Status != nil {
			if st := core.WebhookStatus(*p.Status); st != w.Status {
				w.Status, w.DisabledReason, w.Failures = st, "", 0
			}
		}
		w.UpdatedAt = s.now()
		return tx.UpdateWebhook(ctx, w)
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Delete removes a webhook with its deliveries.
func (s *Service) Delete(ctx context.Context, tenant, id string) error {
	return s.store.InTx(ctx, func(tx core.Tx) error { return tx.DeleteWebhook(ctx, tenant, id) })
}

// RotateTx gives a webhook a new signing secret in the caller's
// transaction and returns it; deliveries attempted from then on are
// signed with it.
func (s *Service) RotateTx(ctx context.Context, tx core.Tx, tenant, id string) (*core.Webhook, string, error) {
	w, err := tx.WebhookForUpdate(ctx, tenant, id)
	if err != nil {
		return nil, "", err
	}
	secret, stored, err := s.newSecret()
	if err != nil {
		return nil, "", err
	}
	w.Secret, w.UpdatedAt = stored, s.now()
	if err := tx.UpdateWebhook(ctx, w); err != nil {
		return nil, "", fmt.Errorf("rotate webhook secret: %w", err)
	}
	return w, secret, nil
}

// ReplayTx makes a delivery due now with a fresh retry schedule.
func (s *Service) ReplayTx(ctx context.Context, tx core.Tx, tenant, webhookID, eventID string) error {
	return tx.ReplayWebhookDelivery(ctx, core.WebhookDeliveryRef{Tenant: tenant, WebhookID: webhookID, EventID: eventID}, s.now())
}
