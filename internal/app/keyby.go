package app

import (
	"context"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// CreateKeyBy is "a key creates a key", the one rule for every door where
// a tenant's key makes another (the dashboard, the APIs): the new key is
// the creator's tenant's and is never freer than its creator. It inherits
// what p leaves open (mailboxes, recipient allowlist, caps, rate limit,
// default stream);
// it always inherits approval and the agent mark; and it refuses p when
// it asks for more than the creator has. The CLI, which is the
// operator's, uses CreateKey and may grant anything.
//
// Each key keeps its own caps and rate limit: a creator's children are
// each held to the creator's numbers, not to a share of them.
func (s *Service) CreateKeyBy(ctx context.Context, creator *core.APIKey, p NewKeyParams) (k *core.APIKey, secret string, err error) {
	if p, err = s.inherit(creator, p); err != nil {
		return nil, "", err
	}
	return s.CreateKey(ctx, p)
}

// inherit narrows p to what creator may grant. Asking for more than the
// creator has is CodeForbidden (403): the creator lacks the right to give
// it, as it lacks a scope a route needs; a malformed ask is
// CodeValidation.
func (s *Service) inherit(creator *core.APIKey, p NewKeyParams) (NewKeyParams, error) {
	for _, sc := range p.Scopes {
		if !creator.Has(sc) {
			return p, core.Errorf(core.CodeForbidden, "scopes", "this API key lacks the %q scope, so it cannot give a key that scope", sc)
		}
	}
	p.Tenant = creator.Tenant
	p.RequiresApproval = p.RequiresApproval || creator.RequiresApproval
	p.Agent = p.Agent || creator.Agent
	if p.DefaultStream == "" {
		p.DefaultStream = creator.DefaultStream // a bulk sender's keys send bulk unless told
	}
	if len(creator.Mailboxes) > 0 {
		if len(p.Mailboxes) == 0 {
			p.Mailboxes = slices.Clone(creator.Mailboxes)
		}
		for _, id := range p.Mailboxes {
			if !creator.MayUseMailbox(id) {
				return p, core.Errorf(core.CodeForbidden, "mailboxes", "this API key may not send from mailbox %q, so it cannot give a key that right", id)
			}
		}
	}
	allow, err := narrowAllowlist(creator.AllowRecipients, p.AllowRecipients)
	if err != nil {
		return p, err
	}
	p.AllowRecipients = allow
	if p.MaxPerHour, err = narrowCap("max_per_hour", "hour", creator.MaxPerHour, p.MaxPerHour); err != nil {
		return p, err
	}
	if p.MaxPerDay, err = narrowCap("max_per_day", "day", creator.MaxPerDay, p.MaxPerDay); err != nil {
		return p, err
	}
	p.RateLimit, err = s.narrowRateLimit(creator, p.RateLimit)
	return p, err
}

// narrowAllowlist is want within have: have itself when want is empty; an
// address have allows, or a domain have lists, otherwise.
func narrowAllowlist(have, want []string) ([]string, error) {
	want, err := NormalizeAllowlist(want)
	if err != nil || len(have) == 0 {
		return want, err
	}
	if len(want) == 0 {
		return slices.Clone(have), nil
	}
	for _, e := range want {
		if strings.Contains(e, "@") && RecipientAllowed(have, e) || slices.Contains(have, e) {
			continue
		}
		return nil, core.Errorf(core.CodeForbidden, "allow_recipients", "%q is outside this API key's own recipient allowlist, so it cannot give a key that right", e)
	}
	return want, nil
}

// narrowCap is a send cap within the creator's: the creator's when want
// is 0.
func narrowCap(field, per string, have, want int) (int, error) {
	switch {
	case want < 0:
		return 0, core.Errorf(core.CodeValidation, field, "%s is 0 (none) or more", field)
	case have <= 0:
		return want, nil
	case want == 0:
		return have, nil
	case want > have:
		return 0, core.Errorf(core.CodeForbidden, field, "%s is at most this API key's own cap, %d sends per %s", field, have, per)
	}
	return want, nil
}

// narrowRateLimit is a request limit within the creator's: the creator's
// own when want is 0 and the creator has one (else the server's, which
// the creator has too). A key may not lift the limit (negative); only
// the operator may.
func (s *Service) narrowRateLimit(creator *core.APIKey, want int) (int, error) {
	if want == 0 {
		return max(creator.RateLimit, 0), nil
	}
	on := s.cfg.RateLimitWindow > 0
	own := s.cfg.RateLimit
	switch {
	case creator.RateLimit < 0:
		on = false
	case creator.RateLimit > 0:
		own = creator.RateLimit
	}
	on = on && own > 0
	if want < 0 || (on && want > own) {
		if !on {
			return 0, core.Errorf(core.CodeValidation, "rate_limit", "rate_limit is 1 or more, or absent for the server's")
		}
		return 0, core.Errorf(core.CodeForbidden, "rate_limit", "rate_limit is 1 to this key's own limit (%d per %s), or absent for its own", own, s.cfg.RateLimitWindow)
	}
	return want, nil
}
