package core

import (
	"context"
	"errors"
)

// ErrReceivingHeld is the answer of ReceivingTx.AddReceivingAddress for an
// address another tenant receives at. The services turn it into the same
// refusal a tenant gets for a domain it lacks, so that nobody learns
// whether, or by whom, an address of somebody else's domain is taken.
var ErrReceivingHeld = errors.New("receiving address held by another tenant")

// ReceivingClaimsTx answers, inside the transaction that adds a receiving
// address or domain, whether the domain receives for someone else.
type ReceivingClaimsTx interface {
	// ReceivingHeldByOther reports whether any receiving address on domain
	// (its catch-all "@domain" or any "…@domain") belongs to a tenant
	// other than tenant.
	ReceivingHeldByOther(ctx context.Context, tenant, domain string) (bool, error)
}
