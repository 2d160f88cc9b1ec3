package core

import (
	"context"
	"time"
)

// Connected mailboxes (docs/mailboxes.md): a mailbox with an imap URL has
// its INBOX synced into received messages by one process at a time (the
// lease of its imap_sync row), and every send from it handed off is owed a
// copy in its Sent folder (an imap_appends row, written in the
// transaction that records the handoff).

// IMAPSyncStatus says whether a connected mailbox is being synced.
type IMAPSyncStatus string

const (
	IMAPSyncing IMAPSyncStatus = "syncing"
	// IMAPPaused: the last attempts failed (ErrorClass says how); the
	// syncer keeps retrying with backoff and resumes by itself.
	IMAPPaused IMAPSyncStatus = "paused"
)

// IMAPSync is where one connected mailbox's sync stands.
type IMAPSync struct {
	Tenant, MailboxID string
	// UIDValidity and LastUID: every message of the INBOX up to LastUID,
	// under that UIDVALIDITY, was handed to receiving. A new UIDVALIDITY
	// starts again (receiving recognises what it already has).
	UIDValidity uint32
	LastUID     uint32
	Status      IMAPSyncStatus
	// ErrorClass is why it is paused, as a class ("login_failed",
	// "connect_failed", "tls_failed", "folder_missing", "protocol"),
	// never the server's text.
	ErrorClass string
	Failures   int
	UpdatedAt  time.Time
}

// IMAPSyncs reads the connected mailboxes and their sync state.
type IMAPSyncs interface {
	// ConnectedMailboxes lists the mailboxes of every tenant that have
	// an imap URL.
	ConnectedMailboxes(ctx context.Context) ([]*Mailbox, error)
	// IMAPSyncState returns a mailbox's sync state; ErrNotFound when it
	// was never synced.
	IMAPSyncState(ctx context.Context, tenant, mailboxID string) (*IMAPSync, error)
	// IMAPAppendsDue reports whether a Sent copy is due and unclaimed:
	// a read, so that an idle appender writes nothing.
	IMAPAppendsDue(ctx context.Context, now time.Time) (bool, error)
}

// IMAPSyncTx changes the sync state and takes its lease.
type IMAPSyncTx interface {
	// SetMailboxIMAP replaces a stored mailbox's imap URL (as stored, and
	// as shown); nil disconnects it. ErrNotFound.
	SetMailboxIMAP(ctx context.Context, tenant, id string, imap []byte, shown string) error
	// LeaseIMAPSync takes or renews the mailbox's sync lease for holder
	// until until: true when holder holds it now (it was free, its lease
	// ended before now, or holder held it already).
	LeaseIMAPSync(ctx context.Context, tenant, mailboxID, holder string, now, until time.Time) (bool, error)
	// ReleaseIMAPSync ends holder's lease (nothing when another holds it).
	ReleaseIMAPSync(ctx context.Context, tenant, mailboxID, holder string) error
	// SaveIMAPSync writes st (UIDVALIDITY, last UID, status, class,
	// failures) while holder holds the lease: false, nothing written,
	// when it does not.
	SaveIMAPSync(ctx context.Context, holder string, st *IMAPSync) (bool, error)
	// QueueIMAPAppend owes the send a copy in its mailbox's Sent folder
	// when the mailbox is connected (nothing otherwise, and nothing the
	// second time: once per send).
	QueueIMAPAppend(ctx context.Context, tenant, sendID, mailboxID string, now time.Time) error
	// ClaimIMAPAppends leases up to n due appends to holder until until.
	ClaimIMAPAppends(ctx context.Context, holder string, now, until time.Time, n int) ([]IMAPAppend, error)
	// FinishIMAPAppend removes holder's append: the copy is in the
	// folder. RetryIMAPAppend releases it, due again at at.
	FinishIMAPAppend(ctx context.Context, sendID, holder string) error
	RetryIMAPAppend(ctx context.Context, sendID, holder string, at time.Time) error
}

// IMAPAppend is a Sent-folder copy still owed.
type IMAPAppend struct {
	Tenant, SendID, MailboxID string
	Attempts                  int
}
