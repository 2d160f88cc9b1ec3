package app

import (
	"context"
	"net/netip"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/imapurl"
)

// ConnectIMAP gives the mailbox m (not yet stored) the imap URL url: it is
// checked, its host judged by the outbound policy when it is an address
// literal (a name is judged each time it is dialled, on what it resolves
// to then), and kept sealed under SENDONCE_SECRET_KEY, with a form
// without the password for views. The URL's text never appears in an
// error.
func (s *Service) ConnectIMAP(m *core.Mailbox, url string) error {
	cfg, err := imapurl.Parse(url)
	if err != nil {
		return core.Errorf(core.CodeValidation, "imap", "imap must be an imaps:// or imap:// URL: %v", err)
	}
	if ip, err := netip.ParseAddr(cfg.Host); err == nil {
		if err := s.cfg.Outbound.Check(ip); err != nil {
			return core.Errorf(core.CodeValidation, "imap", "the IMAP server's address is not one sendonce may connect to (loopback, private and reserved ranges need the operator's --outbound-allow)")
		}
	}
	if m.ReceiveOnly && cfg.Sent != "" {
		return core.Errorf(core.CodeValidation, "imap", "a receive-only mailbox sends nothing to file: leave sent out")
	}
	sealed, err := imapurl.Seal(url, s.cfg.SecretKey)
	if err != nil {
		return err
	}
	m.IMAP, m.IMAPShown = sealed, cfg.Redacted()
	return nil
}

// MailboxIMAP opens a connected mailbox's imap URL (the syncer's and the
// status check's); ok is false when the mailbox is not connected.
func (s *Service) MailboxIMAP(m *core.Mailbox) (cfg imapurl.Config, ok bool, err error) {
	if m.IMAP == nil {
		return imapurl.Config{}, false, nil
	}
	url, err := imapurl.Open(m.IMAP, s.cfg.SecretKey)
	if err != nil {
		return imapurl.Config{}, false, err
	}
	cfg, err = imapurl.Parse(url)
	if err != nil {
		return imapurl.Config{}, false, err
	}
	return cfg, true, nil
}

// IMAPSyncState is where a connected mailbox's sync stands; ErrNotFound
// before its first sync.
func (s *Service) IMAPSyncState(ctx context.Context, tenant, mailboxID string) (*core.IMAPSync, error) {
	return s.store.IMAPSyncState(ctx, tenant, mailboxID)
}

// CheckIMAP logs in to a connected mailbox's IMAP server now: connected
// is false for a mailbox without an imap URL; failure says, as a class,
// why the login failed ("" when it worked, or when no probe is wired).
func (s *Service) CheckIMAP(ctx context.Context, m *core.Mailbox) (connected bool, failure string) {
	cfg, ok, err := s.MailboxIMAP(m)
	if err != nil {
		s.logger.ErrorContext(ctx, "open a mailbox's imap URL", "mailbox_id", m.ID, "error", err)
		return true, "the IMAP settings cannot be opened (SENDONCE_SECRET_KEY)"
	}
	if !ok {
		return false, ""
	}
	if s.cfg.IMAPProbe == nil {
		return true, ""
	}
	return true, s.cfg.IMAPProbe(ctx, cfg)
}

// SetMailboxIMAP connects a stored mailbox to url (a new password, other
// folders), or disconnects it when url is empty, and returns it. A
// running sync takes the new URL at its next connection. ErrNotFound
// (the built-in default mailbox is not stored: create one to connect).
func (s *Service) SetMailboxIMAP(ctx context.Context, tenant, id, url string) (*core.Mailbox, error) {
	m, err := s.store.Mailbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if err := s.OpenTransport(m); err != nil {
		return nil, err
	}
	m.IMAP, m.IMAPShown = nil, ""
	if url != "" {
		if err := s.ConnectIMAP(m, url); err != nil {
			return nil, err
		}
	}
	err = s.store.InTx(ctx, func(tx core.Tx) error { return tx.SetMailboxIMAP(ctx, tenant, id, m.IMAP, m.IMAPShown) })
	if err != nil {
		return nil, err
	}
	s.mailboxes.forget(tenant + "\x00" + id)
	if m.IMAP != nil {
		s.IMAPChanged()
	}
	return m, nil
}

// IMAPChanged says, once committed, that a mailbox was connected to an
// IMAP server: this process's syncer lists the connected mailboxes at
// once (IMAPWake) instead of at its next scan. Other processes find it at
// theirs (--imap-rescan). It never blocks.
func (s *Service) IMAPChanged() {
	select {
	case s.imapWake <- struct{}{}:
	default: // one wake pending is enough
	}
}

// IMAPWake is what IMAPChanged signals, for the process's one syncer.
func (s *Service) IMAPWake() <-chan struct{} { return s.imapWake }
