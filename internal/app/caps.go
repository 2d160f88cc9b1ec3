package app

import (
	"context"

	"github.com/sendonce/sendonce/internal/core"
)

// CheckCap refuses a create that took the tenant past its cap of r:
// core.LimitExceeded (403 limit_exceeded), and the caller's transaction
// rolls the new row back. Call it right after the insert, in the
// insert's transaction, so concurrent creates cannot both fit (see
// core.Tx.CountCapped). A new capped table needs one line in its create:
//
//	if err := s.CheckCap(ctx, tx, core.ResourceX, tenant); err != nil { return err }
//
// plus its query in sqlstore's capTables and its default in core.
func (s *Service) CheckCap(ctx context.Context, tx core.Tx, r core.Resource, tenant string) error {
	max := s.cfg.Caps[r]
	if max <= 0 {
		return nil
	}
	n, err := tx.CountCapped(ctx, r, tenant)
	if err != nil {
		return err
	}
	if n > max {
		return core.LimitExceeded(r, max)
	}
	return nil
}
