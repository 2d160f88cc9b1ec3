package sqlstore

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// A lookup by idempotency key searches the key's index, whatever the
// number of sends: SQLite has no statistics to tell it that the key is
// rarer than the tenant, and given an ORDER BY the (tenant, id) index can
// serve it walked the whole tenant (found by the soak at 340,000 sends).
func TestListSends_ByKeyUsesTheKeyIndex(t *testing.T) {
	plan := queryPlan(t, core.SendFilter{IdempotencyKey: "k"})
	// One row per send (migration 0040): the key is in sends_idem while
	// the send holds its record under it, in sends_caller_key otherwise.
	for _, index := range []string{"sends_idem", "sends_caller_key"} {
		if !strings.Contains(plan, "USING INDEX "+index+" ") {
			t.Fatalf("plan of the lookup by key: %s; want a search of %s", plan, index)
		}
	}
	if strings.Contains(plan, "SCAN sends") {
		t.Fatalf("plan of the lookup by key: %s; scans sends", plan)
	}
}

// Every filter GET /v1/sends offers has an index behind it: a tag is
// looked up in send_tags' primary key, a recipient in send_addresses', a
// status in (tenant, status, id).
func TestListSends_FiltersUseIndexes(t *testing.T) {
	tag := queryPlan(t, core.SendFilter{TagName: "plan", TagValue: "gold"})
	if !strings.Contains(tag, "send_tags") || !strings.Contains(tag, "INDEX") || strings.Contains(tag, "SCAN send_tags") {
		t.Fatalf("plan of the lookup by tag: %s; want a search of send_tags' index", tag)
	}
	status := queryPlan(t, core.SendFilter{Status: core.StatusQueued})
	if !strings.Contains(status, "sends_tenant_status_id") {
		t.Fatalf("plan of the lookup by status: %s; want sends_tenant_status_id", status)
	}
	rcpt := queryPlan(t, core.SendFilter{Recipient: "ada@example.com"})
	if !strings.Contains(rcpt, "SEARCH send_addresses USING PRIMARY KEY (tenant=? AND address=?)") || strings.Contains(rcpt, "SCAN") {
		t.Fatalf("plan of the lookup by recipient: %s; want a search of send_addresses' primary key", rcpt)
	}
}

// On PostgreSQL the recipient's lookup can use send_addresses' primary
// key. The tables are empty, so sequential scans are turned off: the test
// asks whether the index serves the query, not what a planner with no
// rows to weigh would pick.
func TestListSends_RecipientUsesItsIndexOnPostgres(t *testing.T) {
	ctx := context.Background()
	s := openPGStore(t, pgtest.NewDatabase(t), PostgresOptions{})
	conn, err := s.PG.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	joined := pgPlan(t, s, conn, core.SendFilter{Recipient: "ada@example.com", Limit: 100})
	if !strings.Contains(joined, "send_addresses_pkey") || strings.Contains(joined, "Seq Scan on send_addresses") {
		t.Fatalf("plan of the lookup by recipient: %s; want send_addresses_pkey", joined)
	}
	// The lookup by the caller's key: both of its indexes, no scan.
	joined = pgPlan(t, s, conn, core.SendFilter{IdempotencyKey: "k", Limit: 100})
	if !strings.Contains(joined, "sends_idem ") || !strings.Contains(joined, "sends_caller_key") || strings.Contains(joined, "Seq Scan on sends") {
		t.Fatalf("plan of the lookup by key: %s; want sends_idem and sends_caller_key", joined)
	}
}

// pgPlan is PostgreSQL's plan of the statement ListSends runs for f.
func pgPlan(t *testing.T, s *Store, conn *pgxpool.Conn, f core.SendFilter) string {
	t.Helper()
	q, args := listSendsStatement("default", f)
	rows, err := conn.Query(context.Background(), "EXPLAIN "+s.rebind.Rebind(q), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, strings.TrimSpace(line))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// queryPlan is SQLite's plan of the statement ListSends runs for f (a
// page of 100 of the default tenant's sends).
func queryPlan(t *testing.T, f core.SendFilter) string {
	t.Helper()
	f.Limit = 100
	q, args := listSendsStatement("default", f)
	return sqlitePlan(t, q, args...)
}

// sqlitePlan is SQLite's plan of q on an empty database.
func sqlitePlan(t *testing.T, q string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	s := openSQLiteStore(t, "plan.db")
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
	return strings.Join(plan, "; ")
}
