package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sendonce/sendonce/internal/core"
)

// Quarantine (docs/agents.md, "Quarantine"): received mail an inbox's
// rule marks is kept in folder quarantine, in no thread, and every read
// here answers it as missing to a key that may not see it
// (core.APIKey.MaySeeQuarantine): agent keys, and keys without admin.
// The doors (HTTP, dashboard, MCP through HTTP) all read through these
// use cases, so the filter is this one.

// quarantineFolder is the folder m goes to under its mailbox's rule:
// FolderQuarantine when the rule marks it, else FolderInbox.
//
// dmarc_fail (the default) marks mail whose From domain publishes DMARC
// and that no aligned SPF or DKIM pass covers, whatever the policy says
// (p=none included): its sender may be anyone. unknown_senders marks
// that too — a forged From of a known correspondent must not pass — and
// mail whose From address the tenant has never corresponded with: no
// send of the tenant went to it, and no message from it was received
// outside the quarantine (or released from it).
func (s *Service) quarantineFolder(ctx context.Context, m *core.ReceivedMessage) (string, error) {
	mb, err := s.store.Mailbox(ctx, m.Tenant, m.MailboxID)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return "", err
	}
	rule := mb.QuarantineRule() // nil: the default mailbox, never stored
	if rule == core.QuarantineNone {
		return core.FolderInbox, nil
	}
	if m.Auth.DMARCFailed {
		return core.FolderQuarantine, nil
	}
	if rule == core.QuarantineUnknownSenders {
		known, err := s.store.KnownCorrespondent(ctx, m.Tenant, m.Sender)
		if err != nil {
			return "", err
		}
		if !known {
			return core.FolderQuarantine, nil
		}
	}
	return core.FolderInbox, nil
}

// ParseQuarantineRule checks an inbox's quarantine setting; "" is the
// default (dmarc_fail).
func ParseQuarantineRule(v string) (string, error) {
	switch v {
	case "":
		return core.QuarantineDMARCFail, nil
	case core.QuarantineDMARCFail, core.QuarantineUnknownSenders, core.QuarantineNone:
		return v, nil
	}
	return "", core.Errorf(core.CodeValidation, "quarantine", "quarantine must be dmarc_fail, unknown_senders or none")
}

// SetInboxQuarantine sets the rule of the tenant's inbox id in tx (the
// transaction that creates it, or one of its own: ChangeInboxQuarantine).
func (s *Service) SetInboxQuarantine(ctx context.Context, tx core.Tx, tenant, id, rule string) error {
	rule, err := ParseQuarantineRule(rule)
	if err != nil {
		return err
	}
	if err := tx.SetMailboxQuarantine(ctx, tenant, id, rule); err != nil {
		return err
	}
	s.mailboxes.forget(tenant + "\x00" + id)
	return nil
}

// ChangeInboxQuarantine sets an existing inbox's rule. Mail received
// before keeps its folder: a rule decides at arrival.
func (s *Service) ChangeInboxQuarantine(ctx context.Context, key *core.APIKey, id, rule string) error {
	if _, err := ParseQuarantineRule(rule); err != nil {
		return err
	}
	return s.store.InTx(ctx, func(tx core.Tx) error { return s.SetInboxQuarantine(ctx, tx, key.Tenant, id, rule) })
}

// visibleReceived reads one received message of key's tenant that key
// may see; another tenant's, another mailbox's, or a quarantined one for
// a key that may not see the quarantine is core.ErrNotFound, like a
// missing one.
func (s *Service) visibleReceived(ctx context.Context, key *core.APIKey, id string) (*core.ReceivedMessage, error) {
	m, err := s.store.ReceivedMessage(ctx, key.Tenant, id)
	if err != nil {
		return nil, err
	}
	if !key.MayUseMailbox(m.MailboxID) || (m.Folder == core.FolderQuarantine && !key.MaySeeQuarantine()) {
		return nil, core.ErrNotFound
	}
	return m, nil
}

// ReleaseReceived moves a quarantined message into the inbox, in tx (the
// Idempotency-Key's): it joins its thread as if it had just arrived,
// counts as the reply to the send it answers, and email.received is
// queued. A message already out of the quarantine is answered as it is,
// and nothing changes.
func (s *Service) ReleaseReceived(ctx context.Context, tx core.Tx, key *core.APIKey, id string) (*core.ReceivedMessage, error) {
	m, err := s.visibleReceived(ctx, key, id)
	if err != nil {
		return nil, err
	}
	if !key.MaySeeQuarantine() {
		return nil, core.ErrNotFound
	}
	if m.Folder != core.FolderQuarantine {
		return m, nil
	}
	// The move comes first: of two releases at once, the second waits
	// here for the first's commit and then finds nothing to move.
	moved, err := tx.ReleaseReceived(ctx, key.Tenant, id)
	if err != nil || !moved {
		if err == nil {
			m.Folder = core.FolderInbox
		}
		return m, err
	}
	if err := s.threadFor(ctx, tx, m); err != nil {
		return nil, err
	}
	if err := tx.SetReceivedThread(ctx, key.Tenant, id, m.ThreadID, m.SendID); err != nil {
		return nil, err
	}
	if err := s.fileReceived(ctx, tx, m); err != nil {
		return nil, err
	}
	m.Folder = core.FolderInbox
	s.logger.InfoContext(ctx, "received message released", slog.String("id", id), slog.String("key", key.ID))
	return m, nil
}

// DeleteReceived deletes one received message, quarantined or not, for
// a key that may see the quarantine (an admin's, not an agent's): an
// agent must not make what waits there, or anything else, disappear.
func (s *Service) DeleteReceived(ctx context.Context, key *core.APIKey, id string) error {
	if !key.MaySeeQuarantine() {
		return core.ErrNotFound
	}
	if _, err := s.visibleReceived(ctx, key, id); err != nil {
		return err
	}
	return s.store.InTx(ctx, func(tx core.Tx) error { return tx.DeleteReceived(ctx, key.Tenant, id) })
}

// ReleaseQuarantined is ReleaseReceived in a transaction of its own, for
// doors without an Idempotency-Key (the dashboard's button): a release is
// idempotent by itself, a second one changes nothing.
func (s *Service) ReleaseQuarantined(ctx context.Context, key *core.APIKey, id string) (*core.ReceivedMessage, error) {
	var m *core.ReceivedMessage
	err := s.store.InTx(ctx, func(tx core.Tx) (err error) {
		m, err = s.ReleaseReceived(ctx, tx, key, id)
		return err
	})
	return m, err
}
