package delivery

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// QueueMigration is one of River's schema migrations (the queue's tables,
// applied by MigrateSQLite and MigratePostgres) and whether a database has
// it. River records no time that it hands back.
type QueueMigration struct {
	Version int
	Name    string
	Applied bool
}

// QueueMigrationsSQLite lists River's migrations and which db has; db nil
// stands for a database not created yet (River's migrator lists what it
// knows without a connection). It only reads.
func QueueMigrationsSQLite(ctx context.Context, db *sql.DB) ([]QueueMigration, error) {
	m, err := rivermigrate.New(riversqlite.New(db), nil)
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	return queueMigrations(ctx, m.AllVersions(), db != nil, m.ExistingVersions)
}

// QueueMigrationsPostgres is QueueMigrationsSQLite on PostgreSQL.
func QueueMigrationsPostgres(ctx context.Context, pool *pgxpool.Pool) ([]QueueMigration, error) {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	return queueMigrations(ctx, m.AllVersions(), true, m.ExistingVersions)
}

func queueMigrations(ctx context.Context, all []rivermigrate.Migration, exists bool,
	existing func(context.Context) ([]rivermigrate.Migration, error)) ([]QueueMigration, error) {
	var applied []int
	if exists {
		have, err := existing(ctx)
		if err != nil {
			return nil, fmt.Errorf("river migrations: %w", err)
		}
		for _, h := range have {
			applied = append(applied, h.Version)
		}
	}
	out := make([]QueueMigration, len(all))
	for i, m := range all {
		out[i] = QueueMigration{Version: m.Version, Name: m.Name, Applied: slices.Contains(applied, m.Version)}
	}
	return out, nil
}
