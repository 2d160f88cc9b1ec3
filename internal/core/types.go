package core

import (
	"slices"
	"strings"
	"time"
)

// Status is where a send stands. See docs/api.md, "Statuses".
type Status string

const (
	StatusPendingApproval Status = "pending_approval"
	StatusScheduled       Status = "scheduled"
	StatusQueued          Status = "queued"
	StatusSending         Status = "sending"
	StatusSent            Status = "sent"
	StatusDelivered       Status = "delivered"
	StatusFailed          Status = "failed"
	StatusBounced         Status = "bounced"
	StatusComplained      Status = "complained"
	StatusSuppressed      Status = "suppressed"
	StatusUnknown         Status = "unknown"
	StatusCanceled        Status = "canceled"
)

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	switch s {
	case StatusPendingApproval, StatusScheduled, StatusQueued, StatusSending, StatusSent, StatusDelivered,
		StatusFailed, StatusBounced, StatusComplained, StatusSuppressed, StatusUnknown, StatusCanceled:
		return true
	}
	return false
}

// Send is one request to deliver one message.
type Send struct {
	ID             string
	Tenant         string
	IdempotencyKey string
	MailboxID      string
	Status         Status
	From           string // rendered address, display name included
	To, Cc, Bcc    []string
	ReplyTo        []string
	Subject        string
	Text, HTML     string
	Headers        []Header
	Tags           map[string]string
	TemplateID     string
	MessageID      string
	Attempts       int
	LastError      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	SentAt         *time.Time
	// AttemptToken names the attempt that holds the send while it is
	// sending, so that a late finisher cannot overwrite a newer decision.
	AttemptToken string
	LeaseUntil   *time.Time
	// Tries counts the attempts begun (the retry budget; Attempts counts
	// those that reached the relay). NextAttemptAt is when a queued send
	// is due: the send row is its own delivery job.
	Tries         int
	NextAttemptAt *time.Time
	// InReplyTo is the msg-id (with brackets) a reply answers, "" for none;
	// References are the thread's earlier msg-ids.
	InReplyTo  string
	References []string
	// Forward is a forwarded original message (RFC 5322, whole), attached
	// as message/rfc822; nil for none.
	Forward []byte
	// Raw is the client's own message (SMTP submission): delivered as it
	// is, with only the headers sendonce must add. nil for a send built
	// from its fields.
	Raw []byte
	// RawMessageID is the Message-ID the client gave: Raw's own, read when
	// the message was parsed, or a Resend request's Message-ID header
	// ("" when none): AcceptSend keeps it as MessageID instead of making
	// one, without parsing Raw again.
	RawMessageID string
	// Recipients are the recipient states stored for the send, filled by
	// Store.SendWithEvents (read with the send, as of one moment) and
	// Store.ListSends.
	Recipients []RecipientState
	// ScheduledAt is the time a scheduled send was due (scheduled_at); nil
	// for a send made to go at once.
	ScheduledAt *time.Time
	// Attachments are the send's files in order, set when it is accepted.
	// A send read from the store has only AttachmentCount: the bytes are
	// read by Store.SendAttachments, for the attempt that needs them.
	Attachments     []Attachment
	AttachmentCount int
	// HoldReason, set when the send is prepared, makes AcceptSend hold it
	// for a person's approval whatever its key says (an agent's reply
	// outside its thread, a forward): why it waits. Not stored: the status
	// and the accepted event's detail keep it.
	HoldReason string
	// Provider and ProviderMessageID name the provider that took the send
	// and its id there (section 15), filled by Store.SendWithEvents; ""
	// otherwise.
	Provider, ProviderMessageID string
	// Stream is the send's stream; "" is read as StreamTransactional.
	Stream Stream
	// TraceParent is the W3C traceparent of the span that accepted the
	// send ("" when tracing was off): its attempts' spans are its
	// children, in whichever process makes them. Never shown.
	TraceParent string
	// Unsubscribe: the caller asked for the one-click unsubscribe headers
	// (a bulk send carries them anyway: NeedsUnsubscribe).
	Unsubscribe bool
}

// NeedsUnsubscribe reports whether the send's messages carry the one-click
// unsubscribe headers (RFC 8058): every bulk send's, and those of a send
// that asked for them.
func (s *Send) NeedsUnsubscribe() bool { return s.Stream == StreamBulk || s.Unsubscribe }

// Attachment is one file of a send, stored as given and rendered the same
// on every attempt.
type Attachment struct {
	Filename    string
	ContentType string
	// ContentID makes the part inline (referenced as "cid:…" from the
	// HTML), without angle brackets; "" for a plain attachment.
	ContentID string
	Data      []byte
}

// Header is one extra header a caller asked for.
type Header struct {
	Name, Value string
}

// Event is one entry of a send's history.
type Event struct {
	// ID is stable and unique ("evt_…"): every webhook delivery of the
	// event carries it. The store assigns one when it is empty.
	ID     string
	Type   string // one of the Event… names
	At     time.Time
	Detail string
	// Recipient is the address the event is about; "" when it is about the
	// whole send.
	Recipient string
	// Bounce says why a recipient bounced or was delayed (EventBounced,
	// EventDeliveryDelayed); nil otherwise.
	Bounce *Bounce
}

// Bounce is what a bounce report or an SMTP reply said about one recipient.
type Bounce struct {
	Type           string   // BouncePermanent or BounceTransient
	SubType        string   // e.g. "General", "NoEmail", "MailboxFull", "Suppressed"
	Status         string   // the enhanced status code (RFC 3463), e.g. "5.1.1"
	Message        string   // a sentence for people
	DiagnosticCode []string // the remote MTA's own words, e.g. "smtp; 550 5.1.1 no such user"
}

// Bounce types, as Resend's webhook payloads name them.
const (
	BouncePermanent = "Permanent"
	BounceTransient = "Transient"
)

// Scope is a permission an API key holds.
type Scope string

const (
	ScopeSend  Scope = "send"
	ScopeRead  Scope = "read"
	ScopeAdmin Scope = "admin"
)

// ParseScopes parses "send,read" into scopes; unknown names are an error.
func ParseScopes(s string) ([]Scope, error) {
	var out []Scope
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		switch Scope(p) {
		case ScopeSend, ScopeRead, ScopeAdmin:
			if !slices.Contains(out, Scope(p)) {
				out = append(out, Scope(p))
			}
		default:
			return nil, Errorf(CodeValidation, "scopes", "unknown scope %q (want send, read or admin)", p)
		}
	}
	if len(out) == 0 {
		return nil, Errorf(CodeValidation, "scopes", "at least one scope is required")
	}
	return out, nil
}

// APIKey is a caller's credential. The secret itself is never kept.
type APIKey struct {
	ID               string
	Tenant           string
	Name             string
	SecretHash       []byte
	Scopes           []Scope
	Mailboxes        []string // empty: any mailbox of the tenant
	RequiresApproval bool
	CreatedAt        time.Time
	RevokedAt        *time.Time
	// Agent marks a key made for an AI agent (keys create --agent): its
	// sends may not set bcc, from or extra headers, each of them is written
	// to the audit log, and it lists only its own sends.
	Agent bool
	// AllowRecipients limits to, cc and bcc to these addresses or domains
	// (lower case; "example.com" or "@example.com" allows a whole domain).
	// Empty: any recipient.
	AllowRecipients []string
	// MaxPerHour and MaxPerDay cap the sends this key may create in any
	// sliding hour and day; 0: no cap.
	MaxPerHour, MaxPerDay int
	// RateLimit overrides the server's --rate-limit for this key: requests
	// per --rate-limit-window. 0 takes the server's; negative: no limit.
	RateLimit int
	// DefaultStream is the stream of the key's sends that name none ("":
	// transactional), on every send route.
	DefaultStream Stream
}

// Has reports whether the key holds scope s.
func (k *APIKey) Has(s Scope) bool { return slices.Contains(k.Scopes, s) }

// MayUseMailbox reports whether the key may send from mailbox id.
func (k *APIKey) MayUseMailbox(id string) bool {
	return len(k.Mailboxes) == 0 || slices.Contains(k.Mailboxes, id)
}

// Template is a stored message template.
type Template struct {
	Tenant  string
	ID      string
	Subject string
	Text    string
	HTML    string
	// Compat is what a template made through Resend's /templates carries
	// beyond sendonce's fields (a JSON object the compatibility layer
	// owns); "" for native templates. A native PUT that leaves it empty
	// keeps the stored one.
	Compat    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// DefaultMailboxID names the mailbox every tenant has from the first start.
const DefaultMailboxID = "default"

// Mailbox is a sending identity.
type Mailbox struct {
	Tenant      string
	ID          string
	Address     string
	Name        string
	Transport   string // "" means the server's default transport
	ReceiveOnly bool
	// Quarantine is the rule for mail it receives (QuarantineDMARCFail,
	// QuarantineUnknownSenders, QuarantineNone); "" reads as the default
	// (QuarantineRule).
	Quarantine string
	CreatedAt  time.Time
	// IMAP is the connected mailbox's imap URL as stored (sealed under
	// SENDONCE_SECRET_KEY when one is set: it holds a password), nil when
	// the mailbox is not connected; IMAPShown is it without its password,
	// what views show (docs/mailboxes.md).
	IMAP      []byte
	IMAPShown string
}

// InboxMessage is a message the capture transport kept.
type InboxMessage struct {
	ID         string
	Tenant     string
	SendID     string
	MessageID  string
	From       string
	To         []string
	Subject    string
	Raw        []byte
	ReceivedAt time.Time
}

// SendFilter selects sends for a list.
type SendFilter struct {
	IdempotencyKey string
	Status         Status
	Limit          int
	After          string // cursor: a send id; the list continues after it
	// APIKeyID limits the list to the sends this key created (agent keys).
	APIKeyID string
	// APIKeyIDs, when not nil, limits the list to the sends these keys
	// created (a restricted key's lookup by Idempotency-Key: the keys
	// sharing its namespace).
	APIKeyIDs []string
	// Before is a cursor too: the list holds sends newer than it, still
	// newest first (Resend's "before").
	Before string
	// Recipient keeps sends with this address (lower case, bare) in to, cc
	// or bcc; TagName and TagValue sends with this tag.
	Recipient         string
	TagName, TagValue string
	CreatedAfter      time.Time // zero: no bound
	CreatedBefore     time.Time // zero: no bound
}

// Domain is a sending domain of a tenant with its DKIM key. Messages whose
// From domain is Domain are signed with it.
type Domain struct {
	Tenant string
	// Domain is the lower-case A-label form, without a final dot.
	Domain    string
	Selector  string
	Algorithm string // "rsa2048" or "ed25519"
	// PrivateKey is the key as stored: sealed under SENDONCE_SECRET_KEY, or
	// plaintext PEM when no secret was configured. It is never shown.
	PrivateKey []byte
	// PublicRecord is the value of the DKIM TXT record to publish at
	// <Selector>._domainkey.<Domain>.
	PublicRecord string
	// Status is the outcome of the last DNS check (DomainStatus values);
	// signing does not depend on it.
	Status    DomainStatus
	CreatedAt time.Time
	// Receiving says the domain takes mail at the inbound listener: the
	// records to publish include its MX (MXHost). CatchAll is the mailbox
	// that takes mail for its addresses no mailbox holds ("": those are
	// refused with 550). Both live in the receiving routes, not the
	// domains table; MXHost is the server's --inbound-name.
	Receiving bool
	CatchAll  string
	MXHost    string
	// DKIMKeys are the domain's keys besides the signing one (a
	// rotation's pending key, rotated-out ones), from the
	// domain_dkim_keys table; the service fills them when it reads a
	// domain.
	DKIMKeys []*DKIMKey
}

// DomainStatus is what the last DNS check of a domain concluded, in the
// words Resend's API uses for them.
type DomainStatus string

const (
	DomainNotStarted DomainStatus = "not_started" // never checked
	DomainPending    DomainStatus = "pending"     // a check is running
	DomainVerified   DomainStatus = "verified"    // the published DKIM key is the stored one
	DomainFailed     DomainStatus = "failed"      // it is missing, wrong, or DNS did not answer
)

// AuditEntry is one line of the audit log: a send request made by an agent
// key (or carrying an intent), whatever its outcome.
type AuditEntry struct {
	ID             string
	Tenant         string
	APIKeyID       string
	At             time.Time
	Route          string
	Intent         string // the Sendonce-Intent header, canonical JSON; "" when none
	IdempotencyKey string
	Status         int    // the HTTP status answered
	Outcome        string // created, replayed, refused, error
	Code           string // the error code when refused
	SendID         string
	Detail         string // the error message when refused
}
