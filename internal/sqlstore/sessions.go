package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// The dashboard's sessions live in the database so that every API process
// of one deployment honours them. They are few and written rarely (sign-in,
// a touch a minute, sign-out), so they go straight to the writer, outside
// the group commit.

// CreateSession stores a new dashboard session and deletes the sessions
// created before expiredBefore (past their absolute lifetime).
func (s *Store) CreateSession(ctx context.Context, ds *core.DashboardSession, expiredBefore time.Time) error {
	if _, err := s.w.exec(ctx, `DELETE FROM dashboard_sessions WHERE created_at < ?`, micros(expiredBefore)); err != nil {
		return fmt.Errorf("purge dashboard sessions: %w", err)
	}
	_, err := s.w.exec(ctx, `INSERT INTO dashboard_sessions (id, tenant, api_key_id, csrf, created_at, seen_at) VALUES (?, ?, ?, ?, ?, ?)`,
		ds.ID, ds.Tenant, ds.APIKeyID, ds.CSRF, micros(ds.CreatedAt), micros(ds.SeenAt))
	if err != nil {
		return fmt.Errorf("create dashboard session: %w", err)
	}
	return nil
}

// Session returns the dashboard session with that id; core.ErrNotFound.
func (s *Store) Session(ctx context.Context, id string) (*core.DashboardSession, error) {
	var ds core.DashboardSession
	var created, seen int64
	err := s.w.queryRow(ctx, `SELECT id, tenant, api_key_id, csrf, created_at, seen_at FROM dashboard_sessions WHERE id = ?`, id).
		Scan(&ds.ID, &ds.Tenant, &ds.APIKeyID, &ds.CSRF, &created, &seen)
	if err := rowErr("read dashboard session", err); err != nil {
		return nil, err
	}
	ds.CreatedAt, ds.SeenAt = fromMicros(created), fromMicros(seen)
	return &ds, nil
}

// TouchSession records that the session was used at at.
func (s *Store) TouchSession(ctx context.Context, id string, at time.Time) error {
	if _, err := s.w.exec(ctx, `UPDATE dashboard_sessions SET seen_at = ? WHERE id = ?`, micros(at), id); err != nil {
		return fmt.Errorf("touch dashboard session: %w", err)
	}
	return nil
}

// DeleteSession ends a session (sign-out, expiry); deleting none is no error.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if _, err := s.w.exec(ctx, `DELETE FROM dashboard_sessions WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete dashboard session: %w", err)
	}
	return nil
}
