package sqlstore

import (
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
)

// The guard's counts of bulk sends, the tenant's and per From address,
// run at every complaint or bounce in the transaction that records it:
// each is one range of the partial index sends_bulk_sent_from, read
// without a table row.
func TestReputation_SendCountsReadTheIndexAlone(t *testing.T) {
	for name, q := range map[string]string{"tenant": streamSendsSQL(core.StreamBulk), "senders": senderSendsSQL(core.StreamBulk)} {
		args := []any{"default", int64(0)}
		if name == "senders" {
			args = append(args, 10)
		}
		plan := sqlitePlan(t, q, args...)
		if !strings.Contains(plan, "USING COVERING INDEX sends_bulk_sent_from") {
			t.Errorf("plan of the %s count: %s; want a search of the covering index sends_bulk_sent_from", name, plan)
		}
	}
}
