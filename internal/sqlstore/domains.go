package sqlstore

import (
	"cmp"
	"context"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

const domainColumns = `tenant, domain, selector, algorithm, private_key, public_record, status, created_at`

func scanDomain(r rowScanner) (*core.Domain, error) {
	var (
		d         core.Domain
		createdAt int64
	)
	err := r.Scan(&d.Tenant, &d.Domain, &d.Selector, &d.Algorithm, &d.PrivateKey, &d.PublicRecord, &d.Status, &createdAt)
	if err := rowErr("scan domain", err); err != nil {
		return nil, err
	}
	d.CreatedAt = fromMicros(createdAt)
	return &d, nil
}

// Domain implements core.Store.
func (s *Store) Domain(ctx context.Context, tenant, domain string) (*core.Domain, error) {
	return scanDomain(s.r.queryRow(ctx, `SELECT `+domainColumns+` FROM domains WHERE tenant = ? AND domain = ?`, tenant, domain))
}

// ListDomains implements core.Store.
func (s *Store) ListDomains(ctx context.Context, tenant string) ([]*core.Domain, error) {
	return list(ctx, s.r, "list domains", scanDomain, []*core.Domain{},
		`SELECT `+domainColumns+` FROM domains WHERE tenant = ? ORDER BY domain`, tenant)
}

// InsertDomain implements core.Tx; core.CodeConflict when the tenant has
// the domain already.
func (t *Tx) InsertDomain(ctx context.Context, d *core.Domain) error {
	n, err := t.q.exec(ctx, `INSERT INTO domains (`+domainColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, domain) DO NOTHING`,
		d.Tenant, d.Domain, d.Selector, d.Algorithm, d.PrivateKey, d.PublicRecord, cmp.Or(d.Status, core.DomainNotStarted), micros(d.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert domain: %w", err)
	}
	if n != 1 {
		return core.Errorf(core.CodeConflict, "domain", "domain %q already exists; remove it first to replace its key", d.Domain)
	}
	return nil
}

// DeleteDomain implements core.Tx.
func (t *Tx) DeleteDomain(ctx context.Context, tenant, domain string) error {
	return t.execOne(ctx, "delete domain", `DELETE FROM domains WHERE tenant = ? AND domain = ?`, tenant, domain)
}

// SetDomainStatus implements core.Tx.
func (t *Tx) SetDomainStatus(ctx context.Context, tenant, domain string, status core.DomainStatus) error {
	return t.execOne(ctx, "set domain status", `UPDATE domains SET status = ? WHERE tenant = ? AND domain = ?`, status, tenant, domain)
}
