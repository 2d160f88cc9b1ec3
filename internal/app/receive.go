package app

import (
	"context"
	"errors"
	"time"
)

// Incoming is one message arriving for one receiving mailbox, from the
// inbound SMTP listener or a connected mailbox's IMAP sync.
type Incoming struct {
	Tenant    string
	MailboxID string
	// Source is where it came from: "smtp" or "imap".
	Source string
	// MailFrom and RcptTo are the SMTP envelope ("" and nil for IMAP).
	MailFrom string
	RcptTo   []string
	RemoteIP string
	Raw      []byte
	// Seen is the IMAP \Seen flag: the message arrives read.
	Seen       bool
	ReceivedAt time.Time
}

// Received says what receiving a message did.
type Received struct {
	ID       string // the received message's id ("rcv_…")
	ThreadID string
	// Duplicate: the same message (same Message-ID, envelope and content)
	// was received before; ID names that first copy and nothing was
	// written.
	Duplicate bool
}

// errReceivingNotBuilt is returned until receiving is wired.
var errReceivingNotBuilt = errors.New("receiving is not built yet")

// Receive stores in once, with its parsed view and thread, in one
// transaction; the same message again is recognised as a duplicate.
func (s *Service) Receive(ctx context.Context, in Incoming) (Received, error) {
	return Received{}, errReceivingNotBuilt
}
