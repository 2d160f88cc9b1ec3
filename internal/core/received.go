package core

import (
	"context"
	"time"
)

// ReceivedMessage is one message received for one mailbox (docs/receiving.md).
type ReceivedMessage struct {
	ID        string
	Tenant    string
	MailboxID string
	ThreadID  string
	// DedupKey identifies the message in its mailbox: the same message
	// delivered again has the same key (app.DedupKey says of what).
	DedupKey string
	// Digest is the SHA-256 of the raw bytes, hex: the raw message is
	// stored once per tenant under it.
	Digest string
	Source string // "smtp" or "imap"
	// The SMTP envelope ("" and nil for IMAP) and the sender's address.
	MailFrom string
	RcptTo   []string
	RemoteIP string
	// The parsed view. MessageID, InReplyTo and References are as written,
	// angle brackets included.
	MessageID   string
	InReplyTo   string
	References  []string
	From        string
	To, Cc      []string
	ReplyTo     []string
	Subject     string
	Date        *time.Time
	Text, HTML  string
	Preview     string // the start of the text (app.Preview): lists read it, and leave Text, HTML and Headers empty
	Headers     []Header
	Attachments []ReceivedAttachment
	Auth        ReceivedAuth
	Size        int
	Read        bool
	// Folder is FolderInbox, or FolderQuarantine for a message kept from
	// agents (its ThreadID is "" until it is released). Reads show a
	// message that is not quarantined in its thread's folder.
	Folder string
	// Sender is From's bare address, lower case ("" when it has none).
	Sender string
	// SendID is the send this message answers ("" for none).
	SendID     string
	ReceivedAt time.Time
}

// ReceivedAttachment is one attachment of a received message. Part is its
// index among the message's leaf parts, which is how its bytes are found
// again in the raw message.
type ReceivedAttachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	ContentID   string `json:"content_id,omitempty"`
	Disposition string `json:"disposition"`
	Size        int    `json:"size"`
	Part        int    `json:"part"`
}

// ReceivedAuth is what the receiving side found of the message's
// authentication.
type ReceivedAuth struct {
	SPF   string `json:"spf"`   // pass, fail, softfail, neutral, none, temperror, permerror
	DKIM  string `json:"dkim"`  // pass, fail, none, temperror, permerror
	DMARC string `json:"dmarc"` // pass, fail, none, temperror, permerror
	// DMARCFailed flags a message whose From domain publishes DMARC and
	// that neither an aligned SPF nor an aligned DKIM pass covers.
	DMARCFailed bool `json:"dmarc_failed"`
	// Results is the Authentication-Results header sendonce wrote.
	Results string `json:"results"`
}

// Folders a thread may be in.
const (
	FolderInbox   = "inbox"
	FolderArchive = "archive"
	FolderSpam    = "spam"
	FolderTrash   = "trash"
)

// Thread is a conversation in one mailbox: received messages and sends.
type Thread struct {
	ID        string
	Tenant    string
	MailboxID string
	Subject   string
	// SubjectKey is the subject without Re:/Fwd: prefixes, lower case
	// (a message joins a thread only by its references, never by this).
	SubjectKey string
	Folder     string
	Labels     []string
	LastAt     time.Time
	CreatedAt  time.Time
	// Read aggregates, filled by reads.
	Messages      int
	Unread        int
	HasAttachment bool
	From          string   // the latest received message's sender
	To, Cc        []string // and its recipients
}

// ThreadItem is one message of a thread: a received message or a send.
type ThreadItem struct {
	Kind      string // "received" or "sent"
	ID        string // rcv_… or snd_…
	MessageID string
	At        time.Time
}

// Thread item kinds.
const (
	ThreadReceived = "received"
	ThreadSent     = "sent"
)

// ReceivedFilter selects received messages for a list, newest first.
type ReceivedFilter struct {
	MailboxIDs    []string // empty: every mailbox
	ThreadID      string
	From          string // the sender's address, exact, any case
	Since, Until  *time.Time
	HasAttachment *bool
	IDs           []string // empty: any
	// Folder is "" for the messages outside the quarantine, or
	// FolderQuarantine for those in it.
	Folder string
	Limit  int
	After  string // cursor: a received message id
}

// ThreadFilter selects threads, most recent first.
type ThreadFilter struct {
	MailboxIDs []string
	Folders    []string
	Label      string
	Read       *bool
	Query      string // in subject or sender, any case
	Limit      int
	After      string // cursor: a thread id
}

// ReceivingAddress routes one address (or "@domain": a catch-all) to a
// mailbox.
type ReceivingAddress struct {
	Address   string
	Tenant    string
	MailboxID string
	CreatedAt time.Time
}

// Receiving reads received mail.
type Receiving interface {
	// ReceivingRoute returns the route of an address: the address itself,
	// else its domain's catch-all; ErrNotFound for neither.
	ReceivingRoute(ctx context.Context, address string) (*ReceivingAddress, error)
	ReceivingAddresses(ctx context.Context, tenant, mailboxID string) ([]string, error)
	ReceivedMessage(ctx context.Context, tenant, id string) (*ReceivedMessage, error)
	// ReceivedRaw returns the raw bytes of the tenant's received message.
	ReceivedRaw(ctx context.Context, tenant, id string) ([]byte, error)
	// ListReceived lists messages without their bodies and headers (Text,
	// HTML and Headers empty; Preview set).
	ListReceived(ctx context.Context, tenant string, f ReceivedFilter) (ms []*ReceivedMessage, more bool, err error)
	Thread(ctx context.Context, tenant, id string) (*Thread, error)
	ListThreads(ctx context.Context, tenant string, f ThreadFilter) (ts []*Thread, more bool, err error)
	// ThreadItems lists a thread's messages, oldest first.
	ThreadItems(ctx context.Context, tenant, threadID string) ([]ThreadItem, error)
	// ReceivedUsage is the count and raw bytes the tenant keeps.
	ReceivedUsage(ctx context.Context, tenant string) (count int, bytes int64, err error)
}

// ReceivingTx writes received mail inside a transaction.
type ReceivingTx interface {
	// InsertReceived stores m and, unless the tenant has them already, its
	// raw bytes. When a message of the same tenant and DedupKey exists it
	// writes nothing and returns that message's id and thread with
	// inserted false.
	InsertReceived(ctx context.Context, m *ReceivedMessage, raw []byte) (id, threadID string, inserted bool, err error)
	// ReceivedBytesForUpdate is the tenant's stored received bytes, read
	// inside the transaction with the tenant's usage row held until it
	// ends, so that concurrent receives check the storage cap one after
	// the other and cannot together exceed it.
	ReceivedBytesForUpdate(ctx context.Context, tenant string) (int64, error)
	// ThreadOfMessageIDs returns the thread of the tenant that holds a
	// message with one of these Message-IDs (the last one that matches
	// wins: References run oldest first); ErrNotFound for none.
	ThreadOfMessageIDs(ctx context.Context, tenant string, messageIDs []string) (string, error)
	InsertThread(ctx context.Context, t *Thread) error
	// AddThreadItem puts a message in a thread and moves the thread's
	// last activity to it (and back to the inbox when received).
	AddThreadItem(ctx context.Context, tenant, threadID string, it ThreadItem) error
	// UpdateThread writes the folder and labels.
	UpdateThread(ctx context.Context, t *Thread) error
	// SetThreadRead marks every received message of the thread read or
	// unread; SetReceivedRead one.
	SetThreadRead(ctx context.Context, tenant, threadID string, read bool) error
	SetReceivedRead(ctx context.Context, tenant, id string, read bool) error
	DeleteThread(ctx context.Context, tenant, id string) error
	AddReceivingAddress(ctx context.Context, a ReceivingAddress) error
	UpdateMailboxName(ctx context.Context, tenant, id, name string) error
	// DeleteMailbox deletes a mailbox and its receiving addresses.
	DeleteMailbox(ctx context.Context, tenant, id string) error
	RemoveReceivingAddresses(ctx context.Context, tenant, mailboxID string) error
	// QueueTenantWebhook queues one delivery of a prebuilt body to each of
	// the tenant's endpoints subscribed to the history name event; subject
	// is the id the event is about.
	QueueTenantWebhook(ctx context.Context, tenant, event, eventID, subject string, body []byte, at time.Time) error
}
