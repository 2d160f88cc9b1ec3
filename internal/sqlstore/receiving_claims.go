package sqlstore

import (
	"context"
	"fmt"
	"strings"
)

// ReceivingHeldByOther implements core.ReceivingClaimsTx. The table is
// small (one row per inbox and receiving domain) and this runs only when
// an address is added, so the suffix match needs no index of its own.
func (t *Tx) ReceivingHeldByOther(ctx context.Context, tenant, domain string) (bool, error) {
	d := strings.ToLower(domain)
	var n int
	err := t.q.queryRow(ctx, `SELECT count(*) FROM receiving_addresses
		WHERE tenant <> ? AND (address = ? OR substr(address, length(address) - ?) = ?)`,
		tenant, "@"+d, len(d), "@"+d).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("receiving domain holders: %w", err)
	}
	return n > 0, nil
}
