package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dkim"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/dnsresolve"
)

// DefaultDKIMRetireAfter is how long a rotated-out key's record stays
// listed to keep before it is listed for removal (--dkim-retire-after):
// long enough for mail signed with it to be delivered, retried and read.
const DefaultDKIMRetireAfter = 7 * 24 * time.Hour

// maxSelectorTries bounds the search for a free selector name.
const maxSelectorTries = 1000

// RotateDKIMParams describes a DKIM key rotation.
type RotateDKIMParams struct {
	Tenant, Domain string
	// Selector is the new key's selector; "" takes the next free one
	// after the signing selector's (s1 → s2, mail-2025 → mail-2026).
	Selector string
	// Algorithm defaults to the signing key's.
	Algorithm string
}

// PrepareDKIMRotation makes a rotation's new key for the tenant's domain,
// sealed as AddDomain's key is, for RotateDKIM to store. Like
// PrepareDomain it runs before any transaction: generating the key is
// slow. ErrNotFound; CodeConflict when a rotation is pending already (a
// second one would leave the first key's record published for nothing);
// CodeValidation for a bad or taken selector or a bad algorithm.
func (s *Service) PrepareDKIMRotation(ctx context.Context, p RotateDKIMParams) (*core.DKIMKey, error) {
	d, err := s.Domain(ctx, p.Tenant, p.Domain)
	if err != nil {
		return nil, err
	}
	taken := map[string]bool{d.Selector: true}
	for _, k := range d.DKIMKeys {
		if k.State == core.DKIMPending {
			return nil, core.Errorf(core.CodeConflict, "domain",
				"a rotation of %s is pending already: publish the record of selector %s and run GET /v1/domains/%s/check, which moves signing to it",
				d.Domain, k.Selector, d.Domain)
		}
		taken[k.Selector] = true
	}
	selector := strings.ToLower(strings.TrimSpace(p.Selector))
	if selector == "" {
		selector = nextSelector(d.Selector, taken)
	}
	if !dnsresolve.ValidHostName(selector) || len(selector)+len("._domainkey.")+len(d.Domain) > 253 {
		return nil, core.Errorf(core.CodeValidation, "selector", "a selector is one or more dot-separated labels of letters, digits and hyphens, such as s2 or mail-2026")
	}
	if taken[selector] {
		return nil, core.Errorf(core.CodeValidation, "selector", "selector %s is one of the domain's keys already: choose another", selector)
	}
	alg, err := dkim.ParseAlgorithm(cmp.Or(p.Algorithm, d.Algorithm))
	if err != nil {
		return nil, core.Errorf(core.CodeValidation, "algorithm", "algorithm must be rsa2048 or ed25519")
	}
	if err := CheckSecretKey(s.cfg.SecretKey); err != nil {
		return nil, err
	}
	key, err := dkim.GenerateKey(alg)
	if err != nil {
		return nil, err
	}
	rec, err := key.DNSRecord(selector, d.Domain)
	if err != nil {
		return nil, err
	}
	sealed, err := dkim.Seal(key, s.cfg.SecretKey)
	if err != nil {
		return nil, err
	}
	return &core.DKIMKey{Tenant: d.Tenant, Domain: d.Domain, Selector: selector, Algorithm: string(alg),
		PrivateKey: sealed, PublicRecord: rec.Value, State: core.DKIMPending}, nil
}

// nextSelector is current with its trailing number one up (a bare name
// counts as 1), skipping taken ones; "" when none is free within bounds.
func nextSelector(current string, taken map[string]bool) string {
	base := strings.TrimRight(current, "0123456789")
	n := 1
	if digits := current[len(base):]; digits != "" && len(digits) < 10 {
		n, _ = strconv.Atoi(digits)
	} else if digits != "" {
		base = current + "-" // too long a number to count on
	}
	for i := n + 1; i <= n+maxSelectorTries; i++ {
		if sel := base + strconv.Itoa(i); !taken[sel] {
			return sel
		}
	}
	return ""
}

// RotateDKIM stores a key PrepareDKIMRotation made, pending, in the
// caller's transaction. CodeConflict when another rotation stored its
// key first; ErrNotFound when the domain was removed meanwhile.
func (s *Service) RotateDKIM(ctx context.Context, tx core.Tx, k *core.DKIMKey) error {
	k.Since = s.Now()
	return tx.InsertPendingDKIMKey(ctx, k)
}

// DKIMKeyRecord is the TXT record of k, to publish.
func DKIMKeyRecord(k *core.DKIMKey) PublishRecord {
	return PublishRecord{Purpose: "dkim", Record: txtRecord(k.Selector+"._domainkey."+k.Domain, k.PublicRecord)}
}

// RotationRecords are the DKIM records of d's keys besides the signing
// one (which DomainRecords gives): to publish (pending, retiring) and to
// remove (retired).
func RotationRecords(d *core.Domain) (publish, remove []PublishRecord) {
	for _, k := range d.DKIMKeys {
		r := DKIMKeyRecord(k)
		switch k.State {
		case core.DKIMPending:
			r.Note = "the new key of a rotation: publish it; signing moves to selector " + k.Selector + " once the domain check sees it"
			publish = append(publish, r)
		case core.DKIMRetiring:
			r.Note = "the former key: keep it published until " + k.RemoveAfter.Format(time.RFC3339) + " so that mail signed with it still verifies"
			publish = append(publish, r)
		case core.DKIMRetired:
			r.Note = "the key of selector " + k.Selector + " signs nothing since " + k.Since.Format(time.RFC3339) + ": remove this record"
			remove = append(remove, r)
		}
	}
	return publish, remove
}

// fillKeys sets the keys of each domain of ds (one tenant's) from keys,
// with their states as of now: a retiring key past --dkim-retire-after
// reads as retired.
func (s *Service) fillKeys(ds []*core.Domain, keys []*core.DKIMKey) {
	retire := cmp.Or(s.cfg.DKIMRetireAfter, DefaultDKIMRetireAfter)
	now := s.Now()
	by := make(map[string]*core.Domain, len(ds))
	for _, d := range ds {
		by[d.Domain], d.DKIMKeys = d, nil
	}
	for _, k := range keys {
		d := by[k.Domain]
		if d == nil {
			continue
		}
		if k.State == core.DKIMRetiring {
			k.RemoveAfter = k.Since.Add(retire)
			if !now.Before(k.RemoveAfter) {
				k.State = core.DKIMRetired
			}
		}
		d.DKIMKeys = append(d.DKIMKeys, k)
	}
}

// StoredDomainCheck is the check of a domain the tenant added.
type StoredDomainCheck struct {
	// Report is the DNS check of the signing selector (after a promotion,
	// the new one).
	Report *dnscheck.Report
	// Pending is the DKIM check of a pending key's record; nil without
	// one.
	Pending *dnscheck.Report
	// Promoted is the selector this check moved signing to; "" for none.
	Promoted string
	// Domain is the domain as it is after the check, keys included.
	Domain *core.Domain
}

// CheckStoredDomain runs the DNS check of the tenant's domain c names
// (c.Tenant, c.Domain, c.NoSenderRules; the stored selector, through the
// configured resolver). First, when a rotation is pending and its record
// is published and is the new key, signing moves to it (PromoteDKIMKey:
// of two checks at once, one promotes). ErrNotFound.
func (s *Service) CheckStoredDomain(ctx context.Context, c DNSCheck) (*StoredDomainCheck, error) {
	tenant := c.Tenant
	d, err := s.Domain(ctx, tenant, c.Domain)
	if err != nil {
		return nil, err
	}
	var res StoredDomainCheck
	if res.Pending, res.Promoted, err = s.promoteIfPublished(ctx, d); err != nil {
		return nil, err
	}
	if res.Report, err = s.CheckDomain(ctx, DNSCheck{Tenant: tenant, Domain: d.Domain, RequireStored: true, NoSenderRules: c.NoSenderRules}); err != nil {
		return nil, err
	}
	if res.Domain, err = s.Domain(ctx, tenant, d.Domain); err != nil {
		return nil, err
	}
	return &res, nil
}

// promoteIfPublished checks the record of d's pending key, if any, and
// promotes the key when the check passes: the record exists, parses and
// is the stored public key.
func (s *Service) promoteIfPublished(ctx context.Context, d *core.Domain) (*dnscheck.Report, string, error) {
	var pending *core.DKIMKey
	for _, k := range d.DKIMKeys {
		if k.State == core.DKIMPending {
			pending = k
		}
	}
	if pending == nil {
		return nil, "", nil
	}
	resolver, err := ResolverAddr(s.cfg.DNSResolver)
	if err != nil {
		return nil, "", core.Errorf(core.CodeValidation, "resolver", "%v", err)
	}
	pk, err := dkim.ParsePublicKeyRecord(pending.PublicRecord)
	if err != nil {
		return nil, "", fmt.Errorf("stored DKIM record of %s (selector %s): %w", d.Domain, pending.Selector, err)
	}
	rep, err := dnscheck.CheckDKIMKey(ctx, dnscheck.Options{Domain: d.Domain, Selector: pending.Selector, Resolver: resolver,
		ExpectedDKIMKey: pk.PublicKey})
	if err != nil {
		return nil, "", fmt.Errorf("check the pending DKIM key of %s: %w", d.Domain, err)
	}
	if VerifyStatus(rep) != core.DomainVerified {
		return rep, "", nil
	}
	promoted, err := s.PromoteDKIMKey(ctx, d.Tenant, d.Domain, pending.Selector)
	if err != nil || !promoted {
		return rep, "", err
	}
	s.logger.InfoContext(ctx, "dkim key promoted", "tenant", d.Tenant, "domain", d.Domain,
		"selector", pending.Selector, "retiring", d.Selector)
	return rep, pending.Selector, nil
}

// PromoteDKIMKey moves the domain's signing to its pending key of
// selector, in a transaction of its own; false when that key was not
// pending any more (another check promoted it).
func (s *Service) PromoteDKIMKey(ctx context.Context, tenant, domain, selector string) (bool, error) {
	var promoted bool
	err := s.store.InTx(ctx, func(tx core.Tx) error {
		var err error
		promoted, err = tx.PromoteDKIMKey(ctx, tenant, domain, selector, s.Now())
		return err
	})
	return promoted, err
}

// Bounds of one periodic round (CheckDueDomains).
const (
	domainCheckPage     = 100
	maxDomainsPerRound  = 1000
	domainCheckDeadline = time.Minute // one domain's check and promotion
)

// CheckDueDomains is one round of the periodic domain check: every domain
// with a pending key gets its rotation checked (and promoted when its
// record is published), and every domain not verified is verified again
// (VerifyDomain, its status recorded). A verified domain's status is not
// re-checked here: a passing DNS failure must not unverify it. At most
// maxDomainsPerRound domains; it returns how many it looked at. One
// domain's failure is logged and the round goes on.
func (s *Service) CheckDueDomains(ctx context.Context) (int, error) {
	var after core.DomainRef
	n := 0
	for n < maxDomainsPerRound {
		refs, err := s.store.DomainsToCheck(ctx, after, min(domainCheckPage, maxDomainsPerRound-n))
		if err != nil {
			return n, err
		}
		for _, ref := range refs {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			n++
			if err := s.checkDue(ctx, ref); err != nil && !errors.Is(err, core.ErrNotFound) {
				s.logger.WarnContext(ctx, "periodic domain check", "tenant", ref.Tenant, "domain", ref.Domain, "error", err)
			}
		}
		if len(refs) < domainCheckPage {
			break
		}
		after = refs[len(refs)-1]
	}
	return n, nil
}

// checkDue checks one domain of CheckDueDomains.
func (s *Service) checkDue(ctx context.Context, ref core.DomainRef) error {
	ctx, cancel := context.WithTimeout(ctx, domainCheckDeadline)
	defer cancel()
	d, err := s.Domain(ctx, ref.Tenant, ref.Domain)
	if err != nil {
		return err
	}
	if d.Status == core.DomainVerified {
		_, _, err := s.promoteIfPublished(ctx, d)
		return err
	}
	status, err := s.VerifyDomain(ctx, d) // promotes too (CheckStoredDomain)
	if err != nil {
		return err
	}
	return s.store.InTx(ctx, func(tx core.Tx) error { return s.RecordDomainStatus(ctx, tx, d, status) })
}
