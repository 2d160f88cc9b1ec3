package app

import (
	"context"
	"errors"
	"net/mail"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// checkVerifiedFrom refuses, under RequireVerifiedDomain, a From address
// whose domain is not one of the tenant's domains with a verified DKIM
// key: on a server whose tenants are strangers, nobody sends as a domain
// they have not shown they control. A 403 stores nothing, so the same
// request succeeds once the domain is verified.
func (s *Service) checkVerifiedFrom(ctx context.Context, tenant, from string) error {
	if !s.cfg.RequireVerifiedDomain {
		return nil
	}
	a, err := mail.ParseAddress(from)
	if err != nil {
		return core.Errorf(core.CodeValidation, "from", "from is not an address")
	}
	at := strings.LastIndexByte(a.Address, '@')
	domain := strings.ToLower(a.Address[at+1:])
	d, err := s.store.Domain(ctx, tenant, domain)
	switch {
	case errors.Is(err, core.ErrNotFound):
		return core.Errorf(core.CodeForbidden, "from", "the %s domain is not verified: add it (POST /v1/domains) and publish its records", domain)
	case err != nil:
		return err
	case d.Status != core.DomainVerified:
		return core.Errorf(core.CodeForbidden, "from", "the %s domain is not verified (status %s): publish its records and check it again", domain, d.Status)
	}
	return nil
}
