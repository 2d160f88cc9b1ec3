package core

import (
	"strings"
	"time"
)

// Where a suppression came from, in the words of Resend's API.
const (
	SuppressionBounce    = "bounce"
	SuppressionComplaint = "complaint"
	SuppressionManual    = "manual"
)

// Suppression is an address a tenant's sends may not be delivered to.
type Suppression struct {
	ID      string // "sup_…"
	Tenant  string
	Address string // lower case
	Reason  string
	Origin  string // SuppressionBounce, SuppressionComplaint or SuppressionManual
	SendID  string // the send whose bounce or complaint added it; "" for manual
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
	ID         string // "inb_…"
	Tenant     string // "" when the token's send no longer exists
	SendID     string
	MailFrom   string
	RcptTo     string
	Reason     string
	Raw        []byte
	ReceivedAt time.Time
}
