package core

import (
	"context"
	"time"
)

// DKIMKeyState is where a domain's DKIM key is in a rotation
// (docs/deliverability.md, "Rotating the DKIM key").
type DKIMKeyState string

const (
	// DKIMActive is the key mail is signed with (the domain's own).
	DKIMActive DKIMKeyState = "active"
	// DKIMPending is a rotation's new key: its record is to be published,
	// and signing moves to it once a domain check sees it.
	DKIMPending DKIMKeyState = "pending"
	// DKIMRetiring stopped signing; its record stays published so that
	// mail signed before still verifies.
	DKIMRetiring DKIMKeyState = "retiring"
	// DKIMRetired is a retiring key past --dkim-retire-after: its record
	// is listed for removal. Computed when read, never stored.
	DKIMRetired DKIMKeyState = "retired"
)

// DKIMKey is one of a domain's keys besides the signing one (which is the
// Domain's Selector and PrivateKey).
type DKIMKey struct {
	Tenant    string
	Domain    string
	Selector  string
	Algorithm string
	// PrivateKey is sealed as Domain.PrivateKey is. It is never shown.
	PrivateKey   []byte
	PublicRecord string
	State        DKIMKeyState
	// Since is when the key entered its state: made (pending), or stopped
	// signing (retiring).
	Since time.Time
	// RemoveAfter is when a retiring key's record may go (Since plus
	// --dkim-retire-after); zero for a pending key. Set by the service.
	RemoveAfter time.Time
}

// DomainRef names one tenant's domain.
type DomainRef struct {
	Tenant, Domain string
}

// DKIMKeys reads domains' keys besides the signing ones.
type DKIMKeys interface {
	// DKIMKeys returns the tenant's keys of domain ("" for every domain
	// of the tenant), by domain and selector.
	DKIMKeys(ctx context.Context, tenant, domain string) ([]*DKIMKey, error)
	// DomainsToCheck returns at most limit domains, of every tenant, the
	// periodic domain check looks at: those with a pending key and those
	// not verified, by tenant and domain after the one given (zero: from
	// the first), so that a round pages through them.
	DomainsToCheck(ctx context.Context, after DomainRef, limit int) ([]DomainRef, error)
}

// DKIMKeysTx changes them.
type DKIMKeysTx interface {
	// InsertPendingDKIMKey stores a rotation's new key; CodeConflict when
	// the domain has a pending key already or the selector is taken,
	// ErrNotFound when the tenant has no such domain.
	InsertPendingDKIMKey(ctx context.Context, k *DKIMKey) error
	// PromoteDKIMKey makes the domain's pending key of selector the
	// signing key and the former signing key retiring since at. It
	// answers false, changing nothing, when that key is no longer
	// pending (another check promoted it first).
	PromoteDKIMKey(ctx context.Context, tenant, domain, selector string, at time.Time) (bool, error)
}
