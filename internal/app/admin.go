package app

import (
	"context"
	"regexp"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
)

// idPattern is what caller-chosen ids (templates, mailboxes) may look like:
// safe in a URL path segment and in logs.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID reports whether id may name a template or mailbox.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// PutTemplate creates or replaces a template.
func (s *Service) PutTemplate(ctx context.Context, tx core.Tx, t *core.Template) (created bool, err error) {
	if !ValidID(t.ID) {
		return false, core.Errorf(core.CodeValidation, "id", "template ids are 1 to 128 letters, digits, '.', '_' or '-'")
	}
	if err := ValidateTemplate(t); err != nil {
		return false, err
	}
	now := s.Now()
	t.CreatedAt, t.UpdatedAt = now, now
	created, err = tx.PutTemplate(ctx, t)
	if err != nil || !created {
		return created, err
	}
	return true, s.CheckCap(ctx, tx, core.ResourceTemplates, t.Tenant)
}

// SaveTemplate is PutTemplate in a transaction of its own (PUT
// /v1/templates/{id}, which is not idempotent by key: a PUT is
// idempotent by itself).
func (s *Service) SaveTemplate(ctx context.Context, t *core.Template) (created bool, err error) {
	err = s.store.InTx(ctx, func(tx core.Tx) error {
		created, err = s.PutTemplate(ctx, tx, t)
		return err
	})
	return created, err
}

// DeleteTemplate removes the tenant's template; ErrNotFound.
func (s *Service) DeleteTemplate(ctx context.Context, tenant, id string) error {
	return s.store.InTx(ctx, func(tx core.Tx) error { return tx.DeleteTemplate(ctx, tenant, id) })
}

// CreateWebhook is AddWebhook in a transaction of its own (the dashboard's
// form, which stores no idempotent answer beside it).
func (s *Service) CreateWebhook(ctx context.Context, w *core.Webhook) error {
	return s.store.InTx(ctx, func(tx core.Tx) error { return s.AddWebhook(ctx, tx, w) })
}

// AddWebhook stores a webhook webhook.Service.Prepare made, within the
// tenant's cap of webhooks.
func (s *Service) AddWebhook(ctx context.Context, tx core.Tx, w *core.Webhook) error {
	if err := tx.InsertWebhook(ctx, w); err != nil {
		return err
	}
	return s.CheckCap(ctx, tx, core.ResourceWebhooks, w.Tenant)
}

// CreateMailbox stores a new mailbox for the tenant.
func (s *Service) CreateMailbox(ctx context.Context, tx core.Tx, m *core.Mailbox) error {
	if !ValidID(m.ID) {
		return core.Errorf(core.CodeValidation, "id", "mailbox ids are 1 to 128 letters, digits, '.', '_' or '-'")
	}
	if m.ID == core.DefaultMailboxID {
		return core.Errorf(core.CodeConflict, "id", "mailbox %q already exists", m.ID)
	}
	a, err := parseAddress("address", m.Address)
	if err != nil {
		return err
	}
	if a.Name != "" {
		return core.Errorf(core.CodeValidation, "address", "address is a bare address; put the display name in name")
	}
	if message.HasLineBreak(m.Name) {
		return core.Errorf(core.CodeValidation, "name", "name must not contain CR or LF")
	}
	if m.Transport != "" {
		if err := s.checkMailboxTransport(m.Transport); err != nil {
			return err
		}
	}
	m.Address = a.Address
	m.CreatedAt = s.Now()
	s.mailboxes.forget(m.Tenant + "\x00" + m.ID) // "default" may be cached as the built-in one
	// The row holds the transport sealed; m keeps the URL for its caller.
	stored := *m
	if stored.Transport, err = sealTransport(m.Transport, s.cfg.SecretKey); err != nil {
		return err
	}
	if err := tx.InsertMailbox(ctx, &stored); err != nil {
		return err
	}
	return s.CheckCap(ctx, tx, core.ResourceMailboxes, m.Tenant)
}
