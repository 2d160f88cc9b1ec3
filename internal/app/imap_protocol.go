package app

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// IMAPStore is what a connected mailbox's workers (internal/imapsync)
// read and write: the mailboxes and their sync state, read from the
// store, and the small protocol of leases and Sent-folder copies, each
// change in a transaction of its own opened here, so that the IMAP door
// opens none.
type IMAPStore struct {
	s *Service
}

// IMAPStore returns the IMAP workers' view of the service.
func (s *Service) IMAPStore() IMAPStore { return IMAPStore{s: s} }

func (m IMAPStore) Mailbox(ctx context.Context, tenant, id string) (*core.Mailbox, error) {
	return m.s.store.Mailbox(ctx, tenant, id)
}

func (m IMAPStore) ConnectedMailboxes(ctx context.Context) ([]*core.Mailbox, error) {
	return m.s.store.ConnectedMailboxes(ctx)
}

func (m IMAPStore) IMAPSyncState(ctx context.Context, tenant, mailboxID string) (*core.IMAPSync, error) {
	return m.s.store.IMAPSyncState(ctx, tenant, mailboxID)
}

func (m IMAPStore) IMAPAppendsDue(ctx context.Context, now time.Time) (bool, error) {
	return m.s.store.IMAPAppendsDue(ctx, now)
}

func (m IMAPStore) Send(ctx context.Context, tenant, id string) (*core.Send, error) {
	return m.s.store.Send(ctx, tenant, id)
}

func (m IMAPStore) SendAttachments(ctx context.Context, id string) ([]core.Attachment, error) {
	return m.s.store.SendAttachments(ctx, id)
}

// LeaseIMAPSync takes or renews holder's lease on the mailbox's sync.
func (m IMAPStore) LeaseIMAPSync(ctx context.Context, tenant, mailboxID, holder string, now, until time.Time) (held bool, err error) {
	err = m.s.store.InTx(ctx, func(tx core.Tx) (err error) {
		held, err = tx.LeaseIMAPSync(ctx, tenant, mailboxID, holder, now, until)
		return err
	})
	return held, err
}

// ReleaseIMAPSync ends holder's lease.
func (m IMAPStore) ReleaseIMAPSync(ctx context.Context, tenant, mailboxID, holder string) error {
	return m.s.store.InTx(ctx, func(tx core.Tx) error { return tx.ReleaseIMAPSync(ctx, tenant, mailboxID, holder) })
}

// SaveIMAPSync writes st while holder holds the lease (false: it does not).
func (m IMAPStore) SaveIMAPSync(ctx context.Context, holder string, st *core.IMAPSync) (held bool, err error) {
	err = m.s.store.InTx(ctx, func(tx core.Tx) (err error) {
		held, err = tx.SaveIMAPSync(ctx, holder, st)
		return err
	})
	return held, err
}

// ClaimIMAPAppends leases up to n due Sent-folder copies to holder.
func (m IMAPStore) ClaimIMAPAppends(ctx context.Context, holder string, now, until time.Time, n int) (claimed []core.IMAPAppend, err error) {
	err = m.s.store.InTx(ctx, func(tx core.Tx) (err error) {
		claimed, err = tx.ClaimIMAPAppends(ctx, holder, now, until, n)
		return err
	})
	return claimed, err
}

// FinishIMAPAppend removes holder's copy owed: it is in the folder, or
// given up.
func (m IMAPStore) FinishIMAPAppend(ctx context.Context, sendID, holder string) error {
	return m.s.store.InTx(ctx, func(tx core.Tx) error { return tx.FinishIMAPAppend(ctx, sendID, holder) })
}

// RetryIMAPAppend makes holder's copy owed due again at at.
func (m IMAPStore) RetryIMAPAppend(ctx context.Context, sendID, holder string, at time.Time) error {
	return m.s.store.InTx(ctx, func(tx core.Tx) error { return tx.RetryIMAPAppend(ctx, sendID, holder, at) })
}
