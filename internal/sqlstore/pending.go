package sqlstore

import (
	"context"
	"sort"
)

// PendingMigrations lists the schema migrations this binary carries that
// the database has not recorded as applied, oldest first. A database
// migrated by a newer binary has none pending: migrations only add.
// Readiness (GET /readyz) asks it on every probe, so it is one read.
func (s *Store) PendingMigrations(ctx context.Context) ([]string, error) {
	names, err := migrationVersions(s.dialect)
	if err != nil {
		return nil, err
	}
	applied, err := stringSet(ctx, s.r, "read applied migrations", "SELECT version FROM sendonce_migrations")
	if err != nil {
		return nil, err
	}
	var pending []string
	for _, name := range names {
		if !applied[name] {
			pending = append(pending, name)
		}
	}
	sort.Strings(pending)
	return pending, nil
}
