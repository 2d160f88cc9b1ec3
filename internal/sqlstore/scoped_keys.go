package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// scopedKeysMigration is the migration from which this database stores
// restricted keys' and Message-ID-derived keys in their current forms
// (0022 began scoping them, 0026 named restricted keys' namespaces by
// their limits).
const scopedKeysMigration = "0026_idempotency_key_limits.sql"

// ScopedKeysSince implements core.Store: when scopedKeysMigration was
// applied. Before that moment keys were stored in older forms.
func (s *Store) ScopedKeysSince(ctx context.Context) (time.Time, error) {
	var at int64
	err := s.r.queryRow(ctx, "SELECT applied_at FROM sendonce_migrations WHERE version = ?", scopedKeysMigration).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("migration %s is not recorded", scopedKeysMigration)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read migration time: %w", err)
	}
	return fromMicros(at), nil
}
