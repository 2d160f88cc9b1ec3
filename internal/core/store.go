package core

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/internal/idemrecord"
)

// Store is the database. Reads run outside transactions; every write runs in
// a Tx handed to the function given to InTx, which commits when that function
// returns nil and rolls back otherwise. That function may run more than once
// before it commits: it acts only through tx and on variables of its own.
type Store interface {
	InTx(ctx context.Context, fn func(tx Tx) error) error
	WebhookStore

	// APIKey returns the key with that id, revoked or not; ErrNotFound.
	APIKey(ctx context.Context, id string) (*APIKey, error)
	ListAPIKeys(ctx context.Context) ([]*APIKey, error)

	// Send returns the tenant's send; ErrNotFound.
	Send(ctx context.Context, tenant, id string) (*Send, error)
	ListSends(ctx context.Context, tenant string, f SendFilter) (sends []*Send, next string, err error)
	SendEvents(ctx context.Context, tenant, id string) ([]Event, error)
	// SendAttachments returns a send's files in order (none: empty).
	SendAttachments(ctx context.Context, id string) ([]Attachment, error)
	// SendWithEvents reads the send and its events as of one moment, so
	// the events never tell of an outcome the status does not show yet.
	SendWithEvents(ctx context.Context, tenant, id string) (*Send, []Event, error)

	Template(ctx context.Context, tenant, id string) (*Template, error)
	ListTemplates(ctx context.Context, tenant string) ([]*Template, error)

	// Mailbox returns a stored mailbox; ErrNotFound (the default mailbox is
	// not stored unless it was configured explicitly).
	Mailbox(ctx context.Context, tenant, id string) (*Mailbox, error)
	ListMailboxes(ctx context.Context, tenant string) ([]*Mailbox, error)

	// Domain returns the tenant's sending domain; ErrNotFound.
	Domain(ctx context.Context, tenant, domain string) (*Domain, error)
	ListDomains(ctx context.Context, tenant string) ([]*Domain, error)

	InboxMessage(ctx context.Context, tenant, id string) (*InboxMessage, error)
	ListInbox(ctx context.Context, tenant string, limit int) ([]*InboxMessage, error)

	// IsSuppressed reports whether address may not be mailed for tenant.
	IsSuppressed(ctx context.Context, tenant, address string) (bool, error)

	// ReserveIdempotency atomically reads the scoped key and, when
	// idemrecord.Decide says Proceed, writes a reservation that holds for
	// lease.
	ReserveIdempotency(ctx context.Context, sc idemrecord.Scope, fingerprint string, now time.Time, lease time.Duration) (idemrecord.Decision, error)
	// CompletedIdempotency returns the scoped key's record when it is
	// completed (nil otherwise), read without the write lock: a completed
	// record does not change until it expires.
	CompletedIdempotency(ctx context.Context, sc idemrecord.Scope) (*idemrecord.Record, error)
	// ReleaseIdempotency drops a reservation without storing anything.
	ReleaseIdempotency(ctx context.Context, sc idemrecord.Scope, token string) error
	// PurgeIdempotency deletes keys whose replay time ended before now, and
	// reservations abandoned long ago.
	PurgeIdempotency(ctx context.Context, now time.Time) (int, error)

	// PurgeSends deletes finished sends (sent, failed, canceled) created
	// before the cutoff, with their events and captured messages.
	PurgeSends(ctx context.Context, before time.Time) (int, error)
	// PurgeAudit deletes audit entries made before the cutoff.
	PurgeAudit(ctx context.Context, before time.Time) (int, error)

	// QueueDepth counts sends waiting for or in a delivery attempt.
	QueueDepth(ctx context.Context) (int, error)
	Ping(ctx context.Context) error

	// ListAudit returns the tenant's audit entries, newest first, after the
	// cursor (an entry id) when one is given; next is "" on the last page.
	ListAudit(ctx context.Context, tenant string, limit int, after string) (entries []*AuditEntry, next string, err error)

	// Suppression returns the tenant's entry for an address or an id
	// ("sup_…"); ErrNotFound.
	Suppression(ctx context.Context, tenant, emailOrID string) (*Suppression, error)
	// ListSuppressions lists the tenant's entries, newest first.
	ListSuppressions(ctx context.Context, tenant string, f SuppressionFilter) (list []*Suppression, next string, err error)
	// ListUnmatched lists the tenant's unmatched inbound mail, newest first.
	ListUnmatched(ctx context.Context, tenant string, limit int) ([]*UnmatchedInbound, error)
}

// Tx is one database transaction.
type Tx interface {
	// TxRecords decides an Idempotency-Key and stores its answer inside
	// the transaction: the durable tier of the server's
	// idempotency.Engine.
	idemrecord.TxRecords
	WebhookTx
	InsertAPIKey(ctx context.Context, k *APIKey) error
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error

	InsertSend(ctx context.Context, s *Send) error
	// SendForUpdate reads the send inside the transaction.
	SendForUpdate(ctx context.Context, id string) (*Send, error)
	// UpdateSend writes the mutable fields of s (status, attempts, tries,
	// last_error, sent_at, updated_at, attempt token, lease, next attempt).
	// A send written queued without a next attempt time is due at once.
	UpdateSend(ctx context.Context, s *Send) error
	// UpdateAttempt is UpdateSend for an attempt's outcome: it writes only
	// while the attempt's token still holds the send in sending, and
	// reports whether it did.
	UpdateAttempt(ctx context.Context, s *Send, token string) (held bool, err error)
	// Reschedule moves a scheduled send's time (scheduled_at and when it
	// is due) to at; ErrNotFound.
	Reschedule(ctx context.Context, id string, at, now time.Time) error
	// AddEvent appends events to the send's history, in order, and
	// queues a delivery of each to every enabled webhook of the send's
	// tenant that subscribed to its type (WebhookType), in this
	// transaction.
	AddEvent(ctx context.Context, sendID string, events ...Event) error
	// ClaimDue takes up to limit queued sends due at now for one attempt
	// each: they become sending under token until now plus lease.For
	// their size (LeaseBytes), their tries counted. Oldest due first; on
	// PostgreSQL rows another claimer holds are skipped. Scheduled sends
	// whose time has come become queued first.
	ClaimDue(ctx context.Context, now time.Time, lease Lease, token string, limit int) ([]*Send, error)
	// ExpiredAttempts returns sends in status sending whose lease ended
	// before now.
	ExpiredAttempts(ctx context.Context, now time.Time, limit int) ([]*Send, error)

	// CompleteIdempotency completes a two-step reservation
	// (Store.ReserveIdempotency) in this transaction;
	// idemrecord.ErrReservationLost when the token no longer holds the key.
	CompleteIdempotency(ctx context.Context, sc idemrecord.Scope, token string, resp idemrecord.Response, now, expires time.Time) error

	PutTemplate(ctx context.Context, t *Template) (created bool, err error)
	DeleteTemplate(ctx context.Context, tenant, id string) error

	InsertMailbox(ctx context.Context, m *Mailbox) error

	// InsertDomain stores a new sending domain; CodeConflict when the
	// tenant has that domain already.
	InsertDomain(ctx context.Context, d *Domain) error
	// DeleteDomain removes it; ErrNotFound.
	DeleteDomain(ctx context.Context, tenant, domain string) error
	// SetDomainStatus records the outcome of a DNS check; ErrNotFound.
	SetDomainStatus(ctx context.Context, tenant, domain string, status DomainStatus) error

	InsertInboxMessage(ctx context.Context, m *InboxMessage) error

	// CountKeySends locks the key's row (so that concurrent acceptances by
	// one key are counted one after the other) and counts the sends the
	// key created at or after since, with the oldest one's creation time.
	CountKeySends(ctx context.Context, keyID string, since time.Time) (n int, oldest time.Time, err error)
	// SetSendAPIKey records which key created the send.
	SetSendAPIKey(ctx context.Context, sendID, keyID string) error
	InsertAudit(ctx context.Context, e *AuditEntry) error

	// CountCapped counts the tenant's rows of r after taking a lock that
	// makes concurrent creates of r for the tenant count one after the
	// other (PostgreSQL; SQLite's write transaction excludes other writers
	// anyway). Call it after the insert, in the same transaction: the
	// count includes the new row. app.Service.CheckCap is the one caller.
	CountCapped(ctx context.Context, r Resource, tenant string) (int, error)
	// AddSuppression adds an entry unless the tenant has one for the
	// address already (which stays as it is); created reports which. It
	// fills in ID and CreatedAt from the stored entry.
	AddSuppression(ctx context.Context, s *Suppression) (created bool, err error)
	// DeleteSuppression removes the tenant's entry for an address or an
	// id; ErrNotFound.
	DeleteSuppression(ctx context.Context, tenant, emailOrID string) (*Suppression, error)
	// Recipients returns the recipient states stored for a send.
	Recipients(ctx context.Context, sendID string) ([]RecipientState, error)
	// SetRecipient stores one recipient's state.
	SetRecipient(ctx context.Context, sendID string, r RecipientState) error
	// RecordReport notes an inbound report by its digest; first is false
	// when it was recorded before (and nothing is written).
	RecordReport(ctx context.Context, digest, tenant, sendID string, at time.Time) (first bool, err error)
	InsertUnmatched(ctx context.Context, u *UnmatchedInbound) error
	// ServerSecret returns the deployment's secret of that name, storing
	// fresh (the caller's new random bytes) when there is none yet: every
	// process gets the first one stored.
	ServerSecret(ctx context.Context, name string, fresh []byte) ([]byte, error)
}
