package app

import (
	"context"

	"github.com/sendonce/sendonce/internal/core"
)

// A key limited to mailboxes (core.APIKey.Mailboxes) administers those
// alone: another mailbox of its tenant is, to it, a mailbox that does not
// exist (ErrNotFound, 404), as on Resend's inbox routes. Otherwise such a
// key could point a neighbour's mailbox at an IMAP server it runs and put
// its own mail in front of whatever reads that mailbox.

// SetMailboxIMAPAs is SetMailboxIMAP on behalf of key: ErrNotFound for a
// mailbox key may not use.
func (s *Service) SetMailboxIMAPAs(ctx context.Context, key *core.APIKey, id, url string) (*core.Mailbox, error) {
	if !key.MayUseMailbox(id) {
		return nil, core.ErrNotFound
	}
	return s.SetMailboxIMAP(ctx, key.Tenant, id, url)
}

// MailboxAs is Mailbox on behalf of key: ErrNotFound for a mailbox key
// may not use.
func (s *Service) MailboxAs(ctx context.Context, key *core.APIKey, id string) (*core.Mailbox, error) {
	if !key.MayUseMailbox(id) {
		return nil, core.ErrNotFound
	}
	return s.Mailbox(ctx, key.Tenant, id)
}

// checkCatchAll refuses a catch-all mailbox the key adding the domain may
// not use, in the words of one that does not exist.
func checkCatchAll(key *core.APIKey, id string) error {
	if id != "" && key != nil && !key.MayUseMailbox(id) {
		return core.Errorf(core.CodeValidation, "catch_all", "no mailbox %q", id)
	}
	return nil
}
