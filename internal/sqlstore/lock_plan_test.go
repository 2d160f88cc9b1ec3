package sqlstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// The lock-and-read functions find a key's send through sends_idem however
// the session's first calls went. A session that called them while sends
// was empty and analyzed (what autovacuum leaves on a new database) used to
// keep PL/pgSQL's generic plan from then: a scan of sends, which on a
// benchmark's 20,000 sends took 0.3 to 1 s a call and stalled every batch
// on that connection. Here the plan is frozen on an empty table, the table
// grows, and the next call must still take the index.
func TestPostgres_LockFunctionsPlanTheirLookupPerCall(t *testing.T) {
	pgtest.URL(t)
	ctx := context.Background()
	calls := map[string]string{
		"one key": `SELECT got FROM sendonce_lock_idempotency_key('l', 'default', 'POST', '/v1/send', 'k1')`,
		"batch":   `SELECT got FROM sendonce_lock_idempotency_keys(ARRAY['l'], ARRAY['default'], ARRAY['POST'], ARRAY['/v1/send'], ARRAY['k1'])`,
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			db := pgtest.NewDatabase(t)
			s, err := sqlstore.OpenPostgres(ctx, db, sqlstore.PostgresOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			conn, err := pgx.Connect(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			exec := func(q string) {
				t.Helper()
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			exec(`VACUUM ANALYZE sends`)
			for range 8 { // past PL/pgSQL's five custom plans
				exec(call)
			}
			exec(`INSERT INTO sends (id, tenant, mailbox_id, status, from_addr, to_addrs, cc_addrs, bcc_addrs, reply_to,
					subject, text_body, html_body, headers, tags, message_id, created_at, updated_at,
					idem_key, idem_method, idem_route, idem_fingerprint, idem_token, idem_status, idem_content_type, idem_body, idem_expires_at)
				SELECT 'snd_' || g, 'default', '', 'queued', 'a@example.com', '[]', '[]', '[]', '', 's', 't', '', '{}', '[]', 'm' || g, 0, 0,
					'key' || g, 'POST', '/v1/send', 'fp', 'tok', 200, 'application/json', '\x7b7d', 1
				FROM generate_series(1, 2000) g`)

			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, call); err != nil {
				t.Fatal(err)
			}
			var idem, read int64
			if err := tx.QueryRow(ctx, `SELECT pg_stat_get_xact_numscans('sends_idem'::regclass),
					pg_stat_get_xact_tuples_returned('sends'::regclass)`).Scan(&idem, &read); err != nil {
				t.Fatal(err)
			}
			if idem < 1 || read > 0 {
				t.Fatalf("the lookup after the table grew: %d scans of sends_idem, %d rows of sends read by scans; want the index, no scan", idem, read)
			}
		})
	}
}
