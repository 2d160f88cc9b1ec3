package core

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/idempotency/idemtype"
)

// The store is split by aggregate: one small reading interface (Keys,
// Sends, …) and one changing interface (KeysTx, SendsTx, …) per kind of
// row, so that a consumer names the part it uses. Store and Tx compose
// them; sqlstore implements both on SQLite and PostgreSQL.

// Store is the database. Reads run outside transactions; every write runs in
// a Tx handed to the function given to InTx (see Transactor).
type Store interface {
	Transactor
	Keys
	Sends
	Templates
	Mailboxes
	Domains
	DKIMKeys
	Inbox
	Receiving
	QuarantineReads
	Suppressions
	Reports
	Audit
	Idempotency
	Retention
	Queue
	WebhookStore
	Providers
	IMAPSyncs
	DMARCReports
	Drafts
	Reputation
	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
}

// Tx is one database transaction.
type Tx interface {
	// TxRecords decides an Idempotency-Key and stores its answer inside
	// the transaction: the durable tier of the server's
	// idempotency.Engine.
	idemtype.TxRecords
	KeysTx
	SendsTx
	QueueTx
	TemplatesTx
	MailboxesTx
	DomainsTx
	DKIMKeysTx
	InboxTx
	ReceivingTx
	QuarantineTx
	ReceivingClaimsTx
	AuditTx
	CapsTx
	SuppressionsTx
	UnsubscribesTx
	RecipientsTx
	ReportsTx
	SecretsTx
	WebhookTx
	ProvidersTx
	IMAPSyncTx
	DMARCReportsTx
	DraftsTx
	ReputationTx
}

// Transactor runs writes. InTx commits when fn returns nil and rolls back
// otherwise. fn may run more than once before it commits: it acts only
// through tx and on variables of its own.
type Transactor interface {
	InTx(ctx context.Context, fn func(tx Tx) error) error
}

// Keys reads API keys.
type Keys interface {
	// APIKey returns the key with that id, revoked or not; ErrNotFound.
	APIKey(ctx context.Context, id string) (*APIKey, error)
	ListAPIKeys(ctx context.Context) ([]*APIKey, error)
}

// KeysTx changes API keys.
type KeysTx interface {
	InsertAPIKey(ctx context.Context, k *APIKey) error
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error
	// CountKeySends locks the key's row (so that concurrent acceptances by
	// one key are counted one after the other) and counts the sends the
	// key created at or after since, with the oldest one's creation time.
	CountKeySends(ctx context.Context, keyID string, since time.Time) (n int, oldest time.Time, err error)
	// SetSendAPIKey records which key created the send (what
	// CountKeySends counts).
	SetSendAPIKey(ctx context.Context, sendID, keyID string) error
	// SendAPIKey is the id of the key that created the send, "" when it
	// was not tracked (only agent and capped keys' sends are).
	SendAPIKey(ctx context.Context, sendID string) (string, error)
}

// Sends reads sends. Every read is of one tenant's rows except
// SendAttachments, which follows a send already read.
type Sends interface {
	// Send returns the tenant's send; ErrNotFound.
	Send(ctx context.Context, tenant, id string) (*Send, error)
	ListSends(ctx context.Context, tenant string, f SendFilter) (sends []*Send, next string, err error)
	// SendAttachments returns a send's files in order (none: empty).
	SendAttachments(ctx context.Context, id string) ([]Attachment, error)
	// SendWithEvents reads the send and its events as of one moment, so
	// the events never tell of an outcome the status does not show yet.
	SendWithEvents(ctx context.Context, tenant, id string) (*Send, []Event, error)
	// SendRecipients returns the recipient states stored for a send that
	// was read already (delivery: which recipients are done).
	SendRecipients(ctx context.Context, id string) ([]RecipientState, error)
}

// SendsTx changes sends and their histories.
type SendsTx interface {
	InsertSend(ctx context.Context, s *Send) error
	// SendForUpdate reads the send inside the transaction.
	SendForUpdate(ctx context.Context, id string) (*Send, error)
	// SendForUpdateIn reads the send inside the transaction and holds it
	// only when its status is one of statuses (at least one): a request
	// that changes a send only from those (cancel, reschedule, approve,
	// reconcile) never holds, nor waits for, the row of a send it will not
	// change. On PostgreSQL that row may be one delivery is recording an
	// outcome for, in another batch that waits for a row this batch holds:
	// a deadlock. A send in another status is returned as it is. With no
	// statuses it is a plain read that holds nothing.
	SendForUpdateIn(ctx context.Context, id string, statuses ...Status) (*Send, error)
	// UpdateSend writes the mutable fields of s (status, attempts, tries,
	// last_error, sent_at, updated_at, attempt token, lease, next attempt).
	// A send written queued without a next attempt time is due at once.
	UpdateSend(ctx context.Context, s *Send) error
	// Reschedule moves a scheduled send's time (scheduled_at and when it
	// is due) to at; ErrNotFound.
	Reschedule(ctx context.Context, id string, at, now time.Time) error
	// AddEvent appends events to the send's history, in order, and
	// queues a delivery of each to every enabled webhook of the send's
	// tenant that subscribed to its type (WebhookType), in this
	// transaction.
	AddEvent(ctx context.Context, sendID string, events ...Event) error
}

// Queue reads the delivery queue as a whole.
type Queue interface {
	// QueueDepth counts sends waiting for or in a delivery attempt.
	QueueDepth(ctx context.Context) (int, error)
}

// ClaimParams asks QueueTx.ClaimDue for due sends.
type ClaimParams struct {
	// Now is the time the sends must be due by.
	Now time.Time
	// Lease is how long each claimed attempt holds its send: Now plus
	// Lease.For its size (LeaseBytes).
	Lease Lease
	// Token marks the attempts; UpdateAttempt writes only under it.
	Token string
	// Limit is the most sends claimed.
	Limit int
}

// QueueTx is the delivery side of sends: claiming them for attempts and
// recording the attempts' outcomes.
type QueueTx interface {
	// ClaimDue takes up to p.Limit queued sends due at p.Now for one
	// attempt each: they become sending under p.Token until p.Now plus
	// p.Lease.For their size, their tries counted. Within a tenant its
	// transactional sends first, then its bulk ones; oldest due first
	// within a stream; on PostgreSQL rows another
	// claimer holds are skipped. Scheduled sends whose time has come
	// become queued first.
	ClaimDue(ctx context.Context, p ClaimParams) ([]*Send, error)
	// ExpiredAttempts returns sends in status sending whose lease ended
	// before now.
	ExpiredAttempts(ctx context.Context, now time.Time, limit int) ([]*Send, error)
	// UpdateAttempt is UpdateSend for an attempt's outcome: it writes only
	// while the attempt's token still holds the send in sending, and
	// reports whether it did.
	UpdateAttempt(ctx context.Context, s *Send, token string) (held bool, err error)
}

// Templates reads a tenant's templates.
type Templates interface {
	// Template returns the tenant's template; ErrNotFound.
	Template(ctx context.Context, tenant, id string) (*Template, error)
	ListTemplates(ctx context.Context, tenant string) ([]*Template, error)
}

// TemplatesTx changes templates.
type TemplatesTx interface {
	// PutTemplate creates or replaces t; created reports which.
	PutTemplate(ctx context.Context, t *Template) (created bool, err error)
	// DeleteTemplate removes it; ErrNotFound.
	DeleteTemplate(ctx context.Context, tenant, id string) error
}

// Mailboxes reads a tenant's mailboxes.
type Mailboxes interface {
	// Mailbox returns a stored mailbox; ErrNotFound (the default mailbox is
	// not stored unless it was configured explicitly).
	Mailbox(ctx context.Context, tenant, id string) (*Mailbox, error)
	ListMailboxes(ctx context.Context, tenant string) ([]*Mailbox, error)
}

// MailboxesTx changes mailboxes.
type MailboxesTx interface {
	// InsertMailbox stores a new mailbox; CodeConflict when the id is
	// taken.
	InsertMailbox(ctx context.Context, m *Mailbox) error
}

// Domains reads a tenant's sending domains.
type Domains interface {
	// Domain returns the tenant's sending domain; ErrNotFound.
	Domain(ctx context.Context, tenant, domain string) (*Domain, error)
	ListDomains(ctx context.Context, tenant string) ([]*Domain, error)
}

// DomainsTx changes sending domains.
type DomainsTx interface {
	// InsertDomain stores a new sending domain; CodeConflict when the
	// tenant has that domain already.
	InsertDomain(ctx context.Context, d *Domain) error
	// DeleteDomain removes it; ErrNotFound.
	DeleteDomain(ctx context.Context, tenant, domain string) error
	// SetDomainStatus records the outcome of a DNS check; ErrNotFound.
	SetDomainStatus(ctx context.Context, tenant, domain string, status DomainStatus) error
}

// Inbox reads the capture inbox: the messages the capture transport kept
// instead of delivering.
type Inbox interface {
	// InboxMessage returns the tenant's message; ErrNotFound.
	InboxMessage(ctx context.Context, tenant, id string) (*InboxMessage, error)
	// ListInbox returns the tenant's newest messages first.
	ListInbox(ctx context.Context, tenant string, limit int) ([]*InboxMessage, error)
}

// InboxTx changes the capture inbox.
type InboxTx interface {
	InsertInboxMessage(ctx context.Context, m *InboxMessage) error
}

// Suppressions reads the addresses a tenant's sends may not go to.
type Suppressions interface {
	// IsSuppressed reports whether the tenant has an entry for address,
	// of any stream.
	IsSuppressed(ctx context.Context, tenant, address string) (bool, error)
	// SuppressedFor reports whether address may not be mailed in the
	// tenant's stream: an entry for every stream or for that one.
	SuppressedFor(ctx context.Context, tenant, address string, stream Stream) (bool, error)
	// Suppression returns the tenant's entry for an address or an id
	// ("sup_…"); ErrNotFound.
	Suppression(ctx context.Context, tenant, emailOrID string) (*Suppression, error)
	// ListSuppressions lists the tenant's entries, newest first.
	ListSuppressions(ctx context.Context, tenant string, f SuppressionFilter) (list []*Suppression, next string, err error)
}

// SuppressionsTx changes suppressions.
type SuppressionsTx interface {
	// AddSuppression adds an entry unless the tenant has one for the
	// address already (which stays as it is, unless it held back one
	// stream and s holds back every stream: it is widened, with s's
	// origin, reason and send); created reports whether it was added or
	// widened. It fills in ID and CreatedAt from the stored entry.
	AddSuppression(ctx context.Context, s *Suppression) (created bool, err error)
	// DeleteSuppression removes the tenant's entry for an address or an
	// id; ErrNotFound.
	DeleteSuppression(ctx context.Context, tenant, emailOrID string) (*Suppression, error)
}

// UnsubscribesTx records unsubscribes.
type UnsubscribesTx interface {
	// AddUnsubscribe records that a send's recipient (a normalized
	// address) unsubscribed, via "link" or "mail", once per send and
	// address: created is false when it was recorded before.
	AddUnsubscribe(ctx context.Context, sendID, address, via string, at time.Time) (created bool, err error)
}

// RecipientsTx reads and writes each recipient's own outcome in a send.
type RecipientsTx interface {
	// Recipients returns the recipient states stored for a send.
	Recipients(ctx context.Context, sendID string) ([]RecipientState, error)
	// SetRecipient stores one recipient's state.
	SetRecipient(ctx context.Context, sendID string, r RecipientState) error
}

// Reports reads what the inbound listener could not use.
type Reports interface {
	// ListUnmatched lists the tenant's unmatched inbound mail, newest first.
	ListUnmatched(ctx context.Context, tenant string, limit int) ([]*UnmatchedInbound, error)
}

// ReportParams names an inbound report (a bounce or a complaint) for
// ReportsTx.RecordReport.
type ReportParams struct {
	// Digest identifies the report: the same report delivered twice has
	// the same digest.
	Digest string
	Tenant string
	SendID string
	At     time.Time
}

// ReportsTx records inbound reports.
type ReportsTx interface {
	// RecordReport notes an inbound report by its digest; first is false
	// when it was recorded before (and nothing is written).
	RecordReport(ctx context.Context, p ReportParams) (first bool, err error)
	InsertUnmatched(ctx context.Context, u *UnmatchedInbound) error
	// UnmatchedCount is how many unmatched items the tenant keeps;
	// ReportCount how many reports were recorded on the send.
	UnmatchedCount(ctx context.Context, tenant string) (int, error)
	ReportCount(ctx context.Context, sendID string) (int, error)
}

// Audit reads the audit log.
type Audit interface {
	// ListAudit returns the tenant's audit entries, newest first, after the
	// cursor (an entry id) when one is given; next is "" on the last page.
	ListAudit(ctx context.Context, tenant string, limit int, after string) (entries []*AuditEntry, next string, err error)
}

// AuditTx writes the audit log.
type AuditTx interface {
	InsertAudit(ctx context.Context, e *AuditEntry) error
}

// Idempotency reads the durable tier of Idempotency-Key outside a
// transaction; deciding and storing a key happen in Tx (TxRecords).
type Idempotency interface {
	// CompletedIdempotency returns the scoped key's record when it is
	// completed (nil otherwise), read without the write lock: a completed
	// record does not change until it expires.
	CompletedIdempotency(ctx context.Context, sc idemtype.Scope) (*idemtype.Record, error)
	// ScopedKeysSince is when the database began storing restricted keys'
	// and Message-ID-derived Idempotency-Keys in their current forms
	// (StoredIdempotencyKey): records older than that may be in an older
	// form (the plain key, KeyScopedIdempotencyKey).
	ScopedKeysSince(ctx context.Context) (time.Time, error)
}

// Retention deletes what is kept no longer; delivery's retention loop
// is its caller. Each returns how many rows it deleted.
type Retention interface {
	// PurgeSends deletes finished sends (sent, failed, canceled) created
	// before the cutoff, with their events and captured messages.
	PurgeSends(ctx context.Context, before time.Time) (int, error)
	// PurgeAudit deletes audit entries made before the cutoff.
	PurgeAudit(ctx context.Context, before time.Time) (int, error)
	// PurgeIdempotency deletes the idempotency records expired at now
	// (idemtype.Record.Expired): completed keys past their TTL and
	// reservations past their lease.
	PurgeIdempotency(ctx context.Context, now time.Time) (int, error)
	// PurgeDMARCReports deletes the DMARC reports, with their records,
	// that came before the cutoff.
	PurgeDMARCReports(ctx context.Context, before time.Time) (int, error)
}

// CapsTx counts rows against the tenant's caps (Caps).
type CapsTx interface {
	// CountCapped counts the tenant's rows of r after taking a lock that
	// makes concurrent creates of r for the tenant count one after the
	// other (PostgreSQL; SQLite's write transaction excludes other writers
	// anyway). Call it after the insert, in the same transaction: the
	// count includes the new row. app.Service.CheckCap is the one caller.
	CountCapped(ctx context.Context, r Resource, tenant string) (int, error)
}

// SecretsTx holds the deployment's own secrets (the VERP signing key).
type SecretsTx interface {
	// ServerSecret returns the deployment's secret of that name, storing
	// fresh (the caller's new random bytes) when there is none yet: every
	// process gets the first one stored.
	ServerSecret(ctx context.Context, name string, fresh []byte) ([]byte, error)
}
