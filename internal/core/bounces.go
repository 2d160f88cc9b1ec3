package core

import (
	"slices"
	"strings"
	"time"
)

// Where a suppression came from, in the words of Resend's API.
const (
	SuppressionBounce    = "bounce"
	SuppressionComplaint = "complaint"
	SuppressionManual    = "manual"
	// SuppressionUnsubscribe: the recipient unsubscribed (one-click link
	// or mailto:); the entry holds back bulk mail only.
	SuppressionUnsubscribe = "unsubscribe"
)

// Suppression is an address a tenant's sends may not be delivered to.
type Suppression struct {
	ID      string // "sup_…"
	Tenant  string
	Address string // lower case
	Reason  string
	Origin  string // SuppressionBounce, SuppressionComplaint, SuppressionManual or SuppressionUnsubscribe
	SendID  string // the send whose bounce, complaint or unsubscribe added it; "" for manual
	// Stream is the one stream the entry holds back ("" for every
	// stream): an unsubscribe's is StreamBulk. An entry for every stream
	// added over one for a single stream widens it.
	Stream Stream
	// CreatedAt is when it was first added; adding it again changes nothing.
	CreatedAt time.Time
}

// SuppressionFilter selects suppressions for a list.
type SuppressionFilter struct {
	Email  string // exact address, any case
	Origin string
	Limit  int
	After  string // cursor: a suppression id; the list continues after it
}

// NormalizeAddress is the form suppressions and recipient states are kept
// under: the whole address in lower case. (Local parts are case-sensitive
// in principle; no mail system we know of treats them so, and a bounce
// report's spelling must find the send's.)
func NormalizeAddress(a string) string { return strings.ToLower(strings.TrimSpace(a)) }

// RecipientDelayed is a recipient's status while its delivery is delayed
// (a 4xx, or a DSN with Action: delayed). The other recipient statuses are
// Statuses: queued, sent, delivered, bounced, complained, suppressed,
// failed, unknown.
const RecipientDelayed Status = "delivery_delayed"

// RecipientState is one recipient's own outcome. A recipient without one
// stored takes its send's status (RecipientStatusOf).
type RecipientState struct {
	Address   string
	Status    Status
	Detail    string
	UpdatedAt time.Time
}

// RecipientStatusOf is the status a recipient with no state of its own has
// in a send of status s.
func RecipientStatusOf(s Status) Status {
	switch s {
	case StatusSent, StatusDelivered, StatusFailed, StatusUnknown, StatusBounced, StatusComplained, StatusSuppressed:
		return s
	case StatusCanceled:
		return StatusFailed
	}
	return StatusQueued
}

// UnmatchedInbound is mail the inbound listener accepted but could not use:
// not a report, or a report naming no send of the token's. It is kept for an
// operator (GET /v1/inbound/unmatched).
type UnmatchedInbound struct {
	ID       string // "inb_…"
	Tenant   string // "" when the token's send no longer exists
	SendID   string
	MailFrom string
	RcptTo   string
	Reason   string
	// Raw is the start of the message (at most MaxUnmatchedKeep bytes;
	// nil in lists), Size its whole length.
	Raw        []byte
	Size       int
	ReceivedAt time.Time
}

// Bounds on what the bounce addresses can make sendonce keep: anyone who
// sees a Return-Path can write to them.
const (
	// MaxUnmatchedKeep is how much of an unmatched message is kept: enough
	// to see what it was.
	MaxUnmatchedKeep = 64 << 10
	// MaxUnmatchedPerTenant bounds the unmatched items a tenant keeps;
	// past it more are answered 250 and dropped (logged).
	MaxUnmatchedPerTenant = 1000
	// MaxReportsPerSend bounds the reports recorded on one send: past it
	// a report changes nothing and is kept unmatched, so forged reports
	// cannot grow a send's history and webhook deliveries without end.
	MaxReportsPerSend = 50
)

// suppressing are the permanent statuses (RFC 3463, RFC 7505) that say the
// address itself does not exist or cannot receive mail ever: only these
// put it on the suppression list. docs/deliverability.md says why policy
// (5.7.x), reputation and mailbox-full (5.2.2) bounces do not.
var suppressing = []string{
	"5.1.1",  // bad destination mailbox address
	"5.1.2",  // bad destination system address (the domain does not exist)
	"5.1.3",  // bad destination mailbox address syntax
	"5.1.6",  // destination mailbox has moved, no forwarding address
	"5.1.10", // recipient address has null MX
}

// Suppresses reports whether a permanent bounce with this enhanced status
// code puts the address on the suppression list.
func Suppresses(status string) bool { return slices.Contains(suppressing, status) }

// BounceSubType names a bounce's kind from its status, as Resend's
// payloads do.
func BounceSubType(status string) string {
	switch {
	case Suppresses(status):
		return "NoEmail"
	case strings.HasSuffix(status, ".2.2"):
		return "MailboxFull"
	case strings.HasSuffix(status, ".3.4"), status == "5.2.3":
		return "MessageTooLarge"
	case strings.HasPrefix(status, "5.7."):
		return "ContentRejected"
	}
	return "General"
}
