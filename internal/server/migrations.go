package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/sendonce/sendonce/internal/delivery"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// Schema names a set of migrations OpenStore applies: the store's own, or
// the queue's (River's), in that order.
const (
	SchemaStore = "sendonce"
	SchemaQueue = "river"
)

// SchemaMigration is one migration of one schema and whether the
// database has it.
type SchemaMigration struct {
	Schema string
	sqlstore.Migration
}

// MigrationStatus lists every migration OpenStore would apply to the
// database a --db value names, each applied or pending, and the ones the
// database has that this binary does not know. It changes nothing: an
// SQLite file is opened read-only and never created (an absent one has
// every migration pending), a PostgreSQL session is read-only.
func MigrationStatus(ctx context.Context, dsn string) ([]SchemaMigration, error) {
	if IsPostgres(dsn) {
		pool, err := sqlstore.OpenPostgresReadOnly(ctx, dsn)
		if err != nil {
			return nil, err
		}
		defer pool.Close()
		own, err := sqlstore.PostgresMigrations(ctx, pool)
		if err != nil {
			return nil, err
		}
		queue, err := delivery.QueueMigrationsPostgres(ctx, pool)
		if err != nil {
			return nil, err
		}
		return schemaMigrations(own, queue), nil
	}
	path, err := sqlstore.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	db, err := sqlstore.OpenSQLiteReadOnly(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if db != nil {
		defer db.Close()
	}
	own, err := sqlstore.SQLiteMigrations(ctx, db)
	if err != nil {
		return nil, err
	}
	queue, err := delivery.QueueMigrationsSQLite(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("read queue migrations: %w", err)
	}
	return schemaMigrations(own, queue), nil
}

func schemaMigrations(own []sqlstore.Migration, queue []delivery.QueueMigration) []SchemaMigration {
	out := make([]SchemaMigration, 0, len(own)+len(queue))
	for _, m := range own {
		out = append(out, SchemaMigration{Schema: SchemaStore, Migration: m})
	}
	for _, q := range queue {
		name := fmt.Sprintf("%03d", q.Version)
		if q.Name != "" {
			name += "_" + q.Name
		}
		out = append(out, SchemaMigration{Schema: SchemaQueue, Migration: sqlstore.Migration{Name: name, Applied: q.Applied}})
	}
	return out
}
