package sqlstore

import (
	"context"
	"strings"
)

// ReceivingHeldByOther implements core.ReceivingClaimsTx. The table is
// small (one row per inbox and receiving domain) and this runs only when
// an address is added, so the suffix match needs no index of its own.
func (t *Tx) ReceivingHeldByOther(ctx context.Context, tenant, domain string) (bool, error) {
	d := strings.ToLower(domain)
	n, err := queryCount(ctx, t.q, "receiving domain holders", `SELECT count(*) FROM receiving_addresses
		WHERE tenant <> ? AND (address = ? OR substr(address, length(address) - ?) = ?)`,
		tenant, "@"+d, len(d), "@"+d)
	return n > 0, err
}
