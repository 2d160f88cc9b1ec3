package app

import (
	"context"
	"errors"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// Inbox is a mailbox that receives: Resend's inbox, sendonce's mailbox
// with a receiving address.
type Inbox struct {
	Mailbox   *core.Mailbox
	Addresses []string
	// DMARCReports: its mail is read as DMARC aggregate reports (dmarc.go).
	DMARCReports bool
}

// CreateInbox makes a mailbox that receives (and may send) at address,
// its id "inb_…". The address must be on a receiving domain of the
// tenant (checkReceivingClaim); one another inbox of the tenant holds is
// CodeConflict.
func (s *Service) CreateInbox(ctx context.Context, tx core.Tx, tenant, address, name string) (*core.Mailbox, error) {
	a, err := parseAddress("email_address", address)
	if err != nil {
		return nil, err
	}
	if a.Name != "" {
		return nil, core.Errorf(core.CodeValidation, "email_address", "email_address is a bare address")
	}
	m := &core.Mailbox{Tenant: tenant, ID: NewID("inb_"), Address: strings.ToLower(a.Address), Name: name, CreatedAt: s.Now()}
	if err := s.checkReceivingClaim(ctx, tx, tenant, "email_address", m.Address, false); err != nil {
		return nil, err
	}
	if err := s.CreateMailbox(ctx, tx, m); err != nil {
		return nil, err
	}
	if err := s.addReceiving(ctx, tx, "email_address", core.ReceivingAddress{Address: m.Address, Tenant: tenant, MailboxID: m.ID, CreatedAt: m.CreatedAt}); err != nil {
		return nil, err
	}
	return m, nil
}

// MarkReceiving makes an existing mailbox receive at its own address,
// which must be on a receiving domain of the tenant (checkReceivingClaim).
func (s *Service) MarkReceiving(ctx context.Context, tx core.Tx, m *core.Mailbox) error {
	addr := strings.ToLower(m.Address)
	if err := s.checkReceivingClaim(ctx, tx, m.Tenant, "address", addr, false); err != nil {
		return err
	}
	return s.addReceiving(ctx, tx, "address", core.ReceivingAddress{Address: addr, Tenant: m.Tenant,
		MailboxID: m.ID, CreatedAt: s.Now()})
}

// ListInboxes lists the tenant's mailboxes that receive and key may see.
func (s *Service) ListInboxes(ctx context.Context, key *core.APIKey) ([]Inbox, error) {
	ms, err := s.store.ListMailboxes(ctx, key.Tenant)
	if err != nil {
		return nil, err
	}
	out := []Inbox{}
	for _, m := range ms {
		if !key.MayUseMailbox(m.ID) {
			continue
		}
		addrs, err := s.store.ReceivingAddresses(ctx, key.Tenant, m.ID)
		if err != nil {
			return nil, err
		}
		if len(addrs) > 0 {
			dmarc, err := s.store.IsDMARCInbox(ctx, key.Tenant, m.ID)
			if err != nil {
				return nil, err
			}
			out = append(out, Inbox{Mailbox: m, Addresses: addrs, DMARCReports: dmarc})
		}
	}
	return out, nil
}

// InboxByRef finds an inbox by id or by its address, as Resend's routes
// name one.
func (s *Service) InboxByRef(ctx context.Context, key *core.APIKey, ref string) (*Inbox, error) {
	id := ref
	if strings.Contains(ref, "@") {
		r, err := s.ReceivingRoute(ctx, ref)
		if err != nil || r.Tenant != key.Tenant {
			return nil, core.ErrNotFound
		}
		id = r.MailboxID
	}
	if !key.MayUseMailbox(id) {
		return nil, core.ErrNotFound
	}
	m, err := s.store.Mailbox(ctx, key.Tenant, id)
	if err != nil {
		return nil, err
	}
	addrs, err := s.store.ReceivingAddresses(ctx, key.Tenant, id)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, core.ErrNotFound
	}
	dmarc, err := s.store.IsDMARCInbox(ctx, key.Tenant, id)
	if err != nil {
		return nil, err
	}
	return &Inbox{Mailbox: m, Addresses: addrs, DMARCReports: dmarc}, nil
}

// RenameInbox changes an inbox's name.
func (s *Service) RenameInbox(ctx context.Context, key *core.APIKey, id, name string) error {
	err := s.store.InTx(ctx, func(tx core.Tx) error { return tx.UpdateMailboxName(ctx, key.Tenant, id, name) })
	s.mailboxes.forget(key.Tenant + "\x00" + id)
	return err
}

// RemoveInbox deletes an inbox: its address stops receiving at once.
func (s *Service) RemoveInbox(ctx context.Context, key *core.APIKey, id string) error {
	if id == core.DefaultMailboxID {
		return core.Errorf(core.CodeInvalidState, "id", "the default mailbox cannot be removed")
	}
	err := s.store.InTx(ctx, func(tx core.Tx) error { return tx.DeleteMailbox(ctx, key.Tenant, id) })
	s.mailboxes.forget(key.Tenant + "\x00" + id)
	if errors.Is(err, core.ErrNotFound) {
		return core.ErrNotFound
	}
	return err
}
