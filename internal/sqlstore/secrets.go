package sqlstore

import (
	"context"
	"fmt"
	"time"
)

// ServerSecret implements core.Tx.
func (t *Tx) ServerSecret(ctx context.Context, name string, fresh []byte) ([]byte, error) {
	if _, err := t.q.exec(ctx, `INSERT INTO server_secrets (name, value, created_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, name, fresh, micros(time.Now())); err != nil {
		return nil, fmt.Errorf("store server secret: %w", err)
	}
	var v []byte
	if err := t.q.queryRow(ctx, `SELECT value FROM server_secrets WHERE name = ?`, name).Scan(&v); err != nil {
		return nil, fmt.Errorf("read server secret: %w", err)
	}
	return v, nil
}

// fillRecipients reads the recipient states of a page of sends in one
