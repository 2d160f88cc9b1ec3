package app

import (
	"context"
	"errors"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// A receiving address routes strangers' mail to a tenant, and an address
// row beats its domain's catch-all: were any tenant free to claim any
// address, one tenant could read another's mail. So an address, or a
// domain's catch-all, is claimed only on a domain the tenant has added
// (verified under RequireVerifiedDomain) and on which no other tenant
// receives; every refusal is the same 422, whoever holds the address or
// nobody, so that a refusal says nothing of other tenants.

// checkReceivingClaim refuses address ("local@domain", or "@domain" for a
// catch-all) for tenant unless it may receive there. added says the
// domain row is being inserted in tx (a domain added with receiving), so
// it need not be read back.
func (s *Service) checkReceivingClaim(ctx context.Context, tx core.Tx, tenant, field, address string, added bool) error {
	at := strings.LastIndexByte(address, '@')
	if at < 0 {
		return refuseReceiving(field, address)
	}
	// The domain as POST /v1/domains stores it (an IDN as its A-label).
	domain, err := NormalizeDomain(address[at+1:])
	if err != nil {
		return refuseReceiving(field, address)
	}
	verified := false
	if !added {
		d, err := s.store.Domain(ctx, tenant, domain)
		if errors.Is(err, core.ErrNotFound) {
			return refuseReceiving(field, address)
		}
		if err != nil {
			return err
		}
		verified = d.Status == core.DomainVerified
	}
	if s.cfg.RequireVerifiedDomain && !verified {
		return refuseReceiving(field, address)
	}
	held, err := tx.ReceivingHeldByOther(ctx, tenant, domain)
	if err != nil {
		return err
	}
	if held {
		return refuseReceiving(field, address)
	}
	return nil
}

// addReceiving stores a receiving address checkReceivingClaim allowed; a
// concurrent claim of another tenant that won the race gets the same
// refusal.
func (s *Service) addReceiving(ctx context.Context, tx core.Tx, field string, a core.ReceivingAddress) error {
	err := tx.AddReceivingAddress(ctx, a)
	if errors.Is(err, core.ErrReceivingHeld) {
		return refuseReceiving(field, a.Address)
	}
	return err
}

// refuseReceiving is the one answer for an address a tenant may not
// receive at.

func refuseReceiving(field, address string) error {
	return core.Errorf(core.CodeValidation, field, "%s is not on a receiving domain of this account: receiving addresses "+
		"are on domains the account has added (POST /v1/domains), verified when the server requires it, "+
		"and not receiving for another account", address)
}
