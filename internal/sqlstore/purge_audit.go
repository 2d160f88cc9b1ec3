package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// PurgeAudit implements core.Store. Entry ids are ULIDs, which sort by the
// time they were made, so the purge is a range of the primary key and
// needs no index on the time column; "at" guards against ids minted by a
// clock that ran ahead.
func (s *Store) PurgeAudit(ctx context.Context, before time.Time) (int, error) {
	var u ulid.ULID
	if err := u.SetTime(ulid.Timestamp(before)); err != nil {
		return 0, fmt.Errorf("purge audit: cutoff %v: %w", before, err)
	}
	cutoff := "aud_" + strings.ToLower(u.String())
	n, err := s.w.exec(ctx, `DELETE FROM audit_log WHERE id < ? AND at < ?`, cutoff, micros(before))
	if err != nil {
		return 0, fmt.Errorf("purge audit: %w", err)
	}
	return int(n), nil
}
