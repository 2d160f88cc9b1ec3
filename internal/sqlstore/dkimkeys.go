package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// The domain_dkim_keys table of migration 0037: a domain's keys besides
// the signing one, which stays in domains.

const dkimKeyColumns = `tenant, domain, selector, algorithm, private_key, public_record, state, since`

func scanDKIMKey(r rowScanner) (*core.DKIMKey, error) {
	var (
		k     core.DKIMKey
		since int64
	)
	err := r.Scan(&k.Tenant, &k.Domain, &k.Selector, &k.Algorithm, &k.PrivateKey, &k.PublicRecord, &k.State, &since)
	if err := rowErr("scan dkim key", err); err != nil {
		return nil, err
	}
	k.Since = fromMicros(since)
	return &k, nil
}

// DKIMKeys implements core.Store.
func (s *Store) DKIMKeys(ctx context.Context, tenant, domain string) ([]*core.DKIMKey, error) {
	q, args := `SELECT `+dkimKeyColumns+` FROM domain_dkim_keys WHERE tenant = ?`, []any{tenant}
	if domain != "" {
		q, args = q+` AND domain = ?`, append(args, domain)
	}
	return list(ctx, s.r, "list dkim keys", scanDKIMKey, []*core.DKIMKey{}, q+` ORDER BY domain, selector`, args...)
}

// DomainsToCheck implements core.Store: the domains not verified and
// those with a pending key, in pages by (tenant, domain).
func (s *Store) DomainsToCheck(ctx context.Context, after core.DomainRef, limit int) ([]core.DomainRef, error) {
	return list(ctx, s.r, "list domains to check", func(r rowScanner) (core.DomainRef, error) {
		var d core.DomainRef
		err := r.Scan(&d.Tenant, &d.Domain)
		return d, err
	}, []core.DomainRef{}, `SELECT tenant, domain FROM domains d
		WHERE (tenant > ? OR (tenant = ? AND domain > ?))
		AND (status <> ? OR EXISTS (SELECT 1 FROM domain_dkim_keys k WHERE k.tenant = d.tenant AND k.domain = d.domain AND k.state = ?))
		ORDER BY tenant, domain LIMIT ?`,
		after.Tenant, after.Tenant, after.Domain, core.DomainVerified, core.DKIMPending, limit)
}

// InsertPendingDKIMKey implements core.Tx. The primary key (a selector
// taken) and the partial unique index (one pending key per domain) both
// make it a conflict.
func (t *Tx) InsertPendingDKIMKey(ctx context.Context, k *core.DKIMKey) error {
	if _, err := scanDomain(t.q.queryRow(ctx, `SELECT `+domainColumns+` FROM domains WHERE tenant = ? AND domain = ?`, k.Tenant, k.Domain)); err != nil {
		return err // core.ErrNotFound when the domain is gone
	}
	n, err := t.q.exec(ctx, `INSERT INTO domain_dkim_keys (`+dkimKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`,
		k.Tenant, k.Domain, k.Selector, k.Algorithm, k.PrivateKey, k.PublicRecord, core.DKIMPending, micros(k.Since))
	if err != nil {
		return fmt.Errorf("insert dkim key: %w", err)
	}
	if n != 1 {
		return core.Errorf(core.CodeConflict, "domain", "domain %q has a rotation pending already, or selector %q is taken", k.Domain, k.Selector)
	}
	return nil
}

// PromoteDKIMKey implements core.Tx. The DELETE of the pending row
// decides: of two checks promoting at once, the second's DELETE waits for
// the first's commit (PostgreSQL row lock; SQLite has one writer) and then
// finds no pending row, so it changes nothing.
func (t *Tx) PromoteDKIMKey(ctx context.Context, tenant, domain, selector string, at time.Time) (bool, error) {
	where := []any{tenant, domain, selector, core.DKIMPending}
	k, err := scanDKIMKey(t.q.queryRow(ctx, `SELECT `+dkimKeyColumns+` FROM domain_dkim_keys
		WHERE tenant = ? AND domain = ? AND selector = ? AND state = ?`, where...))
	if errors.Is(err, core.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	n, err := t.q.exec(ctx, `DELETE FROM domain_dkim_keys WHERE tenant = ? AND domain = ? AND selector = ? AND state = ?`, where...)
	if err != nil {
		return false, fmt.Errorf("promote dkim key: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	old, err := scanDomain(t.q.queryRow(ctx, `SELECT `+domainColumns+` FROM domains WHERE tenant = ? AND domain = ?`, tenant, domain))
	if err != nil {
		return false, err
	}
	n, err = t.q.exec(ctx, `UPDATE domains SET selector = ?, algorithm = ?, private_key = ?, public_record = ?
		WHERE tenant = ? AND domain = ? AND selector = ?`,
		k.Selector, k.Algorithm, k.PrivateKey, k.PublicRecord, tenant, domain, old.Selector)
	if err != nil {
		return false, fmt.Errorf("promote dkim key: %w", err)
	}
	if n != 1 {
		// The pending row was ours, so nothing else changes the domain's
		// key meanwhile; roll back rather than half-promote.
		return false, fmt.Errorf("promote dkim key of %s: the domain's signing key changed meanwhile", domain)
	}
	if _, err := t.q.exec(ctx, `INSERT INTO domain_dkim_keys (`+dkimKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		tenant, domain, old.Selector, old.Algorithm, old.PrivateKey, old.PublicRecord, core.DKIMRetiring, micros(at)); err != nil {
		return false, fmt.Errorf("retire dkim key: %w", err)
	}
	return true, nil
}
