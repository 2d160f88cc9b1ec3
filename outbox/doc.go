// Package outbox is a durable email task table in the application's own
// database (SQLite or PostgreSQL) that sends through sendonce exactly once.
//
// The application creates the email task in the same transaction as the
// business change it belongs to:
//
//	tx, _ := db.BeginTx(ctx, nil)
//	// … INSERT INTO users …
//	ob.Enqueue(ctx, tx, outbox.Task{Email: client.SendRequest{To: []string{"ada@example.com"}, Subject: "Welcome", Text: "Hello Ada!"}})
//	tx.Commit()
//
// Enqueue freezes the email (the exact JSON body of POST /v1/send) and makes
// its Idempotency-Key (a UUID v4) right then; nothing is sent inside the
// caller's transaction. If the transaction rolls back, there is no task and
// no email; if it commits, there is exactly one of each.
//
// [Outbox.Run] starts workers that claim due tasks with a lease (two workers
// never work one task at once; a dead worker's lease expires and another
// worker takes the task over), send the stored body with the stored key
// through package client, and record the send id and the outcome. Every
// retry, by any worker, after any restart, carries the same key and the same
// bytes, so the server replays instead of sending again.
//
// A task is in one of these states:
//
//	pending               due at next_attempt_at
//	sending               a worker holds it until lease_until
//	sent                  sendonce accepted it; send_id and send_status are set
//	rejected              a 4xx other than 409/429: the server's final answer; a person must look
//	                      (last_error_code idempotency_key_reused: same key, changed content)
//	needs_reconciliation  attempts or age exhausted while the outcome stayed unknown
//
// "sent" means accepted by sendonce, which then owns delivery: follow the
// send with client.GetSend(send_id).
//
// The outbox never makes a new key for a task. [Outbox.Reconcile] looks the
// key up (GET /v1/sends?idempotency_key=) before anything else; so does a
// retry that comes so late that the server may have forgotten the key
// (Config.KeyTTL).
//
// SQLite: open the database with a busy timeout, e.g.
// "file:app.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)", so
// that workers in several processes wait for each other instead of failing.
// PostgreSQL: use github.com/jackc/pgx/v5/stdlib (driver name "pgx");
// workers claim with FOR UPDATE SKIP LOCKED.
package outbox
