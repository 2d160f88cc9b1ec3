package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

const keyColumns = `id, tenant, name, secret_hash, scopes, mailboxes, requires_approval, created_at, revoked_at,
	agent, allow_recipients, max_per_hour, max_per_day, rate_limit, default_stream`

func scanKey(r rowScanner) (*core.APIKey, error) {
	var (
		k                        core.APIKey
		scopes, mailboxes, allow string
		createdAt                int64
		revokedAt                sql.NullInt64
	)
	err := r.Scan(&k.ID, &k.Tenant, &k.Name, &k.SecretHash, &scopes, &mailboxes, &k.RequiresApproval, &createdAt, &revokedAt,
		&k.Agent, &allow, &k.MaxPerHour, &k.MaxPerDay, &k.RateLimit, &k.DefaultStream)
	if err := rowErr("scan api key", err); err != nil {
		return nil, err
	}
	for _, sc := range strings.Split(scopes, ",") {
		if sc != "" {
			k.Scopes = append(k.Scopes, core.Scope(sc))
		}
	}
	for _, m := range strings.Split(mailboxes, ",") {
		if m != "" {
			k.Mailboxes = append(k.Mailboxes, m)
		}
	}
	for _, a := range strings.Split(allow, ",") {
		if a != "" {
			k.AllowRecipients = append(k.AllowRecipients, a)
		}
	}
	k.CreatedAt, k.RevokedAt = fromMicros(createdAt), fromNullMicros(revokedAt)
	return &k, nil
}

// APIKey implements core.Store. It reads through the writer's database file
// on every request, so a key created or revoked by another process counts at
// once.
func (s *Store) APIKey(ctx context.Context, id string) (*core.APIKey, error) {
	return scanKey(s.r.queryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ?`, id))
}

// ListAPIKeys implements core.Store.
func (s *Store) ListAPIKeys(ctx context.Context) ([]*core.APIKey, error) {
	return list(ctx, s.r, "list api keys", scanKey, nil,
		`SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`)
}

// InsertAPIKey implements core.Tx.
func (t *Tx) InsertAPIKey(ctx context.Context, k *core.APIKey) error {
	scopes := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = string(s)
	}
	_, err := t.q.exec(ctx, `INSERT INTO api_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.Tenant, k.Name, k.SecretHash, strings.Join(scopes, ","), strings.Join(k.Mailboxes, ","),
		k.RequiresApproval, micros(k.CreatedAt), nullMicros(k.RevokedAt),
		k.Agent, strings.Join(k.AllowRecipients, ","), k.MaxPerHour, k.MaxPerDay, k.RateLimit, string(k.DefaultStream))
	if err != nil {
		return fmt.Errorf("insert api key: %w", err)
	}
	return nil
}

// RevokeAPIKey implements core.Tx.
func (t *Tx) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	return t.execOne(ctx, "revoke api key", `UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`, micros(at), id)
}

// CountKeySends implements core.Tx. The key's row is locked first
// (PostgreSQL; SQLite's write transaction excludes other writers anyway), so
// two acceptances by one key never both see room under a cap.
func (t *Tx) CountKeySends(ctx context.Context, keyID string, since time.Time) (int, time.Time, error) {
	var id string
	if err := t.q.queryRow(ctx, `SELECT id FROM api_keys WHERE id = ?`+t.s.forUpdate, keyID).Scan(&id); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, time.Time{}, core.ErrNotFound
		}
		return 0, time.Time{}, fmt.Errorf("lock api key: %w", err)
	}
	var (
		n      int
		oldest sql.NullInt64
	)
	err := t.q.queryRow(ctx, `SELECT count(*), min(created_at) FROM sends WHERE api_key_id = ? AND created_at >= ?`,
		keyID, micros(since)).Scan(&n, &oldest)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count key sends: %w", err)
	}
	var o time.Time
	if oldest.Valid {
		o = fromMicros(oldest.Int64)
	}
	return n, o, nil
}

// SetSendAPIKey implements core.Tx.
func (t *Tx) SetSendAPIKey(ctx context.Context, sendID, keyID string) error {
	return t.execOne(ctx, "set send api key", `UPDATE sends SET api_key_id = ? WHERE id = ?`, keyID, sendID)
}

// SendAPIKey implements core.Tx.
func (t *Tx) SendAPIKey(ctx context.Context, sendID string) (string, error) {
	var id sql.NullString
	err := t.q.queryRow(ctx, `SELECT api_key_id FROM sends WHERE id = ?`, sendID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", core.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("read the send's key: %w", err)
	}
	return id.String, nil
}
