package sqlstore

import (
	"context"
	"fmt"
)

// ReceivedBytesForUpdate implements core.Tx. The upsert that changes
// nothing takes the usage row's lock on PostgreSQL (and makes the row of a
// tenant's first message, so that two first messages wait for each other
// too) and returns the bytes as the last committed receive left them; on
// SQLite the transaction already holds the one writer's lock. Read outside
// the transaction, the usage let concurrent receives each pass the cap
// with the room only one of them had.
func (t *Tx) ReceivedBytesForUpdate(ctx context.Context, tenant string) (int64, error) {
	var bytes int64
	err := t.q.queryRow(ctx, `INSERT INTO received_usage (tenant, messages, bytes) VALUES (?, 0, 0)
		ON CONFLICT (tenant) DO UPDATE SET bytes = received_usage.bytes
		RETURNING bytes`, tenant).Scan(&bytes)
	if err != nil {
		return 0, fmt.Errorf("received usage: %w", err)
	}
	return bytes, nil
}
