package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/sendonce/sendonce/internal/core"
)

const microsPerDay = int64(24 * time.Hour / time.Microsecond)

// DailySendCounts counts the tenant's sends created since since by UTC day
// and status (only those apiKeyID created, when it is not ""). It reads the
// (tenant, id) index from the first id that can be that recent: ids are
// ULIDs, ordered by creation time.
func (s *Store) DailySendCounts(ctx context.Context, tenant, apiKeyID string, since time.Time) ([]core.DaySendCount, error) {
	var first ulid.ULID
	if err := first.SetTime(ulid.Timestamp(since)); err != nil {
		return nil, fmt.Errorf("daily send counts: %w", err)
	}
	where, args := "tenant = ? AND id >= ? AND created_at >= ?", []any{tenant, "snd_" + strings.ToLower(first.String()), micros(since)}
	if apiKeyID != "" {
		where, args = where+" AND api_key_id = ?", append(args, apiKeyID)
	}
	return list(ctx, s.r, "daily send counts", func(r rowScanner) (core.DaySendCount, error) {
		var day int64
		var c core.DaySendCount
		if err := r.Scan(&day, &c.Status, &c.N); err != nil {
			return c, fmt.Errorf("daily send counts: %w", err)
		}
		c.Day = fromMicros(day * microsPerDay)
		return c, nil
	}, nil, `SELECT created_at / `+fmt.Sprint(microsPerDay)+` AS day, status, count(*) FROM sends WHERE `+where+
		` GROUP BY day, status`, args...)
}

// CountSendsInStatus counts the tenant's sends in each of statuses (only
// those apiKeyID created, when it is not "").
func (s *Store) CountSendsInStatus(ctx context.Context, tenant, apiKeyID string, statuses ...core.Status) (map[core.Status]int, error) {
	out := make(map[core.Status]int, len(statuses))
	for _, st := range statuses {
		where, args := "tenant = ? AND status = ?", []any{tenant, st}
		if apiKeyID != "" {
			where, args = where+" AND api_key_id = ?", append(args, apiKeyID)
		}
		n, err := queryCount(ctx, s.r, "count sends", `SELECT count(*) FROM sends WHERE `+where, args...)
		if err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, nil
}
