package sqlstore

import (
	"context"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

// capTables is how each capped resource is counted: a query over one
// tenant's rows, its one parameter the tenant. A new capped table adds
// its line here and its core.Resource.
var capTables = map[core.Resource]string{
	core.ResourceTemplates:    `SELECT count(*) FROM templates WHERE tenant = ?`,
	core.ResourceMailboxes:    `SELECT count(*) FROM mailboxes WHERE tenant = ?`,
	core.ResourceDomains:      `SELECT count(*) FROM domains WHERE tenant = ?`,
	core.ResourceAPIKeys:      `SELECT count(*) FROM api_keys WHERE tenant = ? AND revoked_at IS NULL`,
	core.ResourceWebhooks:     `SELECT count(*) FROM webhooks WHERE tenant = ?`,
	core.ResourceSuppressions: `SELECT count(*) FROM suppressions WHERE tenant = ? AND origin = 'manual'`,
	core.ResourceDrafts:       `SELECT count(*) FROM drafts WHERE tenant = ?`,
}

// CountCapped implements core.Tx. On PostgreSQL a transaction-scoped
// advisory lock on (resource, tenant) makes concurrent creates wait for
// one another, and the count, a statement after the lock, sees every
// create that committed before: under READ COMMITTED each statement reads
// anew. SQLite's one write transaction at a time needs no lock.
func (t *Tx) CountCapped(ctx context.Context, r core.Resource, tenant string) (int, error) {
	q, ok := capTables[r]
	if !ok {
		return 0, fmt.Errorf("count capped: no query for resource %q", r)
	}
	if t.s.PG != nil {
		if _, err := t.q.exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(?, 0))`, "sendonce-cap:"+string(r)+":"+tenant); err != nil {
			return 0, fmt.Errorf("lock %s cap: %w", r, err)
		}
	}
	return queryCount(ctx, t.q, "count "+string(r), q, tenant)
}
