package sqlstore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
)

// A lookup by idempotency key searches the key's index, whatever the
// number of sends: SQLite has no statistics to tell it that the key is
// rarer than the tenant, and given an ORDER BY the (tenant, id) index can
// serve it walked the whole tenant (found by the soak at 340,000 sends).
func TestListSends_ByKeyUsesTheKeyIndex(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, args := listSendsQuery([]string{"tenant = ?", "idempotency_key = ?"}, []any{"default", "k"},
		core.SendFilter{IdempotencyKey: "k"}, 100)
	rows, err := s.r.query(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if got := strings.Join(plan, "; "); !strings.Contains(got, "sends_tenant_idempotency_key") {
		t.Fatalf("plan of the lookup by key: %s; want the sends_tenant_idempotency_key index", got)
	}
}
