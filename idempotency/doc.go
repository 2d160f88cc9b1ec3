// Package idempotency implements the Idempotency-Key state machine that
// sendonce uses for every POST that creates something (docs/api.md,
// "Idempotency", and the IETF httpapi Idempotency-Key draft), and a net/http
// middleware that gives any Go service the same behaviour.
//
// # The middleware in five minutes
//
// Clients send a header Idempotency-Key (a UUID they make once per logical
// operation and reuse on every retry). Wrap the handlers that must not run
// twice:
//
//	store := idempotency.NewMemoryStore() // one process; see below for others
//	mw := idempotency.Middleware(store, &idempotency.Options{
//		RequireKey: true,                                        // 400 without a key
//		Tenant:     func(r *http.Request) string { return accountID(r) },
//	})
//	mux.Handle("POST /orders", mw(createOrder))
//
// Then, for a POST or PATCH with a key (other requests pass through):
//
//   - The first request reserves the key and runs the handler. Its response
//     is buffered; if its status is stored (every 2xx, and every 4xx but
//     401, 403, 409, 413, 429 and 499) it is saved with the key and sent.
//   - A retry with the same key and the same JSON body (compared by SHA-256
//     of its RFC 8785 canonical form, so key order and white space do not
//     matter) gets the stored response byte for byte, same status and
//     Content-Type, plus Idempotent-Replayed: true. The handler does not
//     run.
//   - A retry while the first request still runs gets 409
//     idempotency_key_in_use with Retry-After: 1.
//   - The same key with another body gets 422 idempotency_key_reused.
//   - A 5xx, a panic, or a response larger than Options.MaxResponseBytes
//     is not stored: the key is released and a retry runs afresh. A
//     process that dies mid-request loses its reservation after
//     Options.Lease (30 s); completed keys replay for Options.TTL (24 h).
//   - Bad keys get 400 idempotency_key_invalid, a body that is not JSON
//     400 invalid_json, all as {"error":{"code","message","param"}}
//     (Options.ErrorWriter changes the shape).
//
// Reserve-or-replay is one atomic step in every store: there is no window
// between "is there a response?" and "take the lock" in which a second
// request can slip through, which is the bug of the common "GET the cache,
// SET NX a lock, run, SET the response, DEL the lock" middleware (the
// package's race test reproduces its duplicates).
//
// # Choosing a store
//
//   - MemoryStore: a single process, and unit tests of your own handlers.
//   - redisstore.Store (package idempotency/redisstore): several processes;
//     works on one Redis or a Redis Cluster.
//     Redis cannot make your side effect and the stored response one
//     transaction: if the handler did its work but the response was not
//     stored (a crash, a 5xx after the write), a retry runs it again. Give
//     your own table a unique constraint on the key (ScopeFromContext) and
//     answer a conflict with what the first run created.
//   - SQLStore (SQLite or PostgreSQL): see below.
//
// SQLStore gives the real guarantee when your data lives in the same
// database: call Migrate once at start and set Options.RunInTx. The
// handler then writes in the transaction that also stores its response:
//
//	db, _ := sql.Open("pgx", dsn) // or "sqlite" with _txlock=immediate
//	_ = idempotency.Migrate(ctx, db, idempotency.PostgreSQL)
//	store := idempotency.NewSQLStore(db, idempotency.PostgreSQL)
//	mw := idempotency.Middleware(store, &idempotency.Options{RunInTx: true})
//	mux.Handle("POST /orders", mw(idempotency.WithTx(
//		func(w http.ResponseWriter, r *http.Request, tx *sql.Tx) {
//			// Writes go through tx: they commit together with the stored
//			// response, or roll back on a 5xx, a panic or a lost lease.
//			if _, err := tx.ExecContext(r.Context(), "INSERT INTO orders (item) VALUES ($1)", "book"); err != nil {
//				http.Error(w, "internal error", http.StatusInternalServerError)
//				return
//			}
//			w.WriteHeader(http.StatusCreated)
//		})))
//
// Either the order and its stored response both commit or neither does, so
// a retry can never create the order twice, even after a crash. Call
// SQLStore.Purge now and then to drop expired keys: every store drops a
// record by one rule, Record.Expired (a completed key at the end of its
// TTL, a reservation at the end of its lease).
//
// # One engine
//
// The middleware is a thin HTTP shell around Engine, which sendonce's own
// server uses too. An Engine answers the one question — what does a
// request with this scoped key and fingerprint get: Proceed with a ticket,
// Replay, InUse or Mismatch — by asking composable tiers, cheapest first:
// an in-process replay cache (Config.ReplayCacheEntries), the first
// requests running in this process, an optional shared front store
// (Config.Front, e.g. Redis in front of SQL), a lock-free Lookup of the
// durable record, and the durable tier. The durable tier is either a
// two-step Store (Reserve before the work, Complete after) or, with
// Config.Store nil, a TxRecords that decides and writes the key inside the
// caller's own transaction: one record write per request, committed with
// the work.
//
// # One write protocol
//
// Run is the whole of a transactional write, the one protocol every door
// of sendonce (HTTP, SMTP submission) runs: Begin on the cheap tiers;
// Write.Prepare outside any transaction (the CPU work); one transaction
// that decides the key again, runs the step and stores its answer;
// Committed — or Release on every other way out, panics included. A
// refusal rolls back the step's writes and is stored alone; a status not
// stored (ShouldStore) frees the key; a conflict the transaction runs
// again is not an answer. The typed Result says which.
//
//	e := idempotency.NewEngine(idempotency.Config{Lookup: readCompleted, ReplayCacheEntries: 10000})
//	res := idempotency.Run(ctx, e, idempotency.Write[Tx]{
//		Scope: &scope, Fingerprint: fp, InTx: db.InTx,
//		Prepare: func(ctx context.Context) (idempotency.Step[Tx], error) {
//			order, err := validate(body) // no transaction yet
//			return func(ctx context.Context, tx Tx) (idempotency.Response, error) {
//				return insert(ctx, tx, order) // in the transaction that stores the answer
//			}, err
//		},
//		Refuse: func(err error) (idempotency.Response, bool) { return asAnswer(err) },
//	})
//
// The Ticket underneath (Begin, Ticket.Decide, Ticket.Put,
// Ticket.Committed, Ticket.Release) is there for a protocol of one's own,
// a two-step Store's (Ticket.Complete) above all.
//
// Package idempotencytest is the conformance suite every store runs:
// RunStore for a Store, RunTx for a TxRecords.
//
// # The state machine underneath
//
// A request's key is scoped (tenant, method, route, key). The first request
// with a scoped key reserves it for a lease; the handler then runs and its
// final response is stored with the key in the same database transaction as
// the handler's own writes. A later request with the same scoped key and the
// same fingerprint (SHA-256 of the RFC 8785 canonical JSON body) replays the
// stored response byte for byte. A request while the first is still running
// gets Outcome InUse (HTTP 409); a request with another body gets Mismatch
// (HTTP 422). A reservation whose lease ran out (its process died) may be
// taken over: since the first request's writes only commit together with its
// stored response, and a completion checks the reservation's token, the
// work can never be committed twice.
//
// Stores implement Reserve, Complete (inside the caller's transaction) and
// Release; Decide holds the rules they share so that every store behaves
// alike. The record types and Decide are defined in package
// idempotency/idemtype, a leaf on the standard library only, and
// re-exported here under the same names.
package idempotency
