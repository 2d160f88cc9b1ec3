package sqlstore

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

// PendingMigrations lists the schema migrations this binary carries that
// the database has not recorded as applied, oldest first. A database
// migrated by a newer binary has none pending: migrations only add.
// Readiness (GET /readyz) asks it on every probe, so it is one read.
func (s *Store) PendingMigrations(ctx context.Context) ([]string, error) {
	migrations, pattern := sqliteMigrations, "migrations/sqlite/*.sql"
	if s.dialect == Postgres {
		migrations, pattern = postgresMigrations, "migrations/postgres/*.sql"
	}
	names, err := fs.Glob(migrations, pattern)
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	applied, err := stringSet(ctx, s.r, "read applied migrations", "SELECT version FROM sendonce_migrations")
	if err != nil {
		return nil, err
	}
	var pending []string
	for _, name := range names {
		if v := path.Base(name); !applied[v] {
			pending = append(pending, v)
		}
	}
	sort.Strings(pending)
	return pending, nil
}
