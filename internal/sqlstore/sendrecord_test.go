package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// One row per accepted send (migration 0040, sendrecord.go).

// acceptUnder decides sc and, on Proceed, inserts sd and stores resp as
// the answer, in one transaction: an accept as the write protocol runs it.
func acceptUnder(t *testing.T, s *sqlstore.Store, sc idempotency.Scope, sd *core.Send, now time.Time, resp idempotency.Response) idempotency.Decision {
	t.Helper()
	ctx := context.Background()
	var d idempotency.Decision
	err := s.InTx(ctx, func(tx core.Tx) error {
		var err error
		if d, err = tx.DecideIdempotency(ctx, sc, "fp-"+sc.Key, now); err != nil || d.Outcome != idempotency.Proceed {
			return err
		}
		if err := tx.InsertSend(ctx, sd); err != nil {
			return err
		}
		return tx.PutIdempotency(ctx, sc, "fp-"+sc.Key, d.Token, resp, now, now.Add(time.Hour))
	})
	if err != nil {
		t.Fatalf("accept %q: %v", sc.Key, err)
	}
	return d
}

func sendScope(key string) idempotency.Scope {
	return idempotency.Scope{Tenant: "t", Method: "POST", Route: "/v1/send", Key: key}
}

func answer(id string) idempotency.Response {
	return idempotency.Response{Status: 200, ContentType: "application/json", Body: []byte(`{"id":"` + id + `"}`)}
}

// An accepted send's record is in the send's own row: idempotency_keys
// gets nothing, the retry replays from the row, and the lookup by the
// caller's key finds the send.
func TestSendRecord_AnAcceptWritesOneRow(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		sd := newSend("snd_one", core.StatusQueued, at(1))
		sc := sendScope(sd.IdempotencyKey)
		acceptUnder(t, s, sc, sd, at(1), answer(sd.ID))
		if n := queryInt(t, s, "SELECT count(*) FROM idempotency_keys"); n != 0 {
			t.Fatalf("%d rows in idempotency_keys for an accepted send, want 0", n)
		}
		if n := queryInt(t, s, "SELECT count(*) FROM sends WHERE id = ? AND idem_key = ? AND idem_status = 200", sd.ID, sc.Key); n != 1 {
			t.Fatalf("the send's row holds no record")
		}
		d := decide(t, s, sc, "fp-"+sc.Key, at(2), nil)
		if d.Outcome != idempotency.Replay || string(d.Response.Body) != `{"id":"snd_one"}` {
			t.Fatalf("retry: %v %+v, want the stored answer replayed", d.Outcome, d.Response)
		}
		if d := decide(t, s, sc, "other", at(2), nil); d.Outcome != idempotency.Mismatch {
			t.Fatalf("another payload: %v, want a mismatch", d.Outcome)
		}
		rec, err := s.CompletedIdempotency(context.Background(), sc)
		if err != nil || rec == nil || rec.Response.Status != 200 {
			t.Fatalf("CompletedIdempotency: %+v, %v", rec, err)
		}
		requireByKey(t, s, sd.IdempotencyKey, sd.ID)
	})
}

// requireByKey lists the tenant's sends by the caller's key and wants
// exactly ids, newest first.
func requireByKey(t *testing.T, s *sqlstore.Store, key string, ids ...string) {
	t.Helper()
	got, _, err := s.ListSends(context.Background(), "t", core.SendFilter{IdempotencyKey: key, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("%d sends by key %q, want %v", len(got), key, ids)
	}
	for i, sd := range got {
		if sd.ID != ids[i] {
			t.Fatalf("sends by key %q: %s at %d, want %v", key, sd.ID, i, ids)
		}
	}
}

// Expiry forgets the record and keeps the send: the key makes a new send,
// which holds the key's record from then on, and the lookup by key finds
// both sends.
func TestSendRecord_ExpiryKeepsTheSendAndFreesTheKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		first := newSend("snd_first", core.StatusQueued, at(1))
		sc := sendScope(first.IdempotencyKey)
		acceptUnder(t, s, sc, first, at(1), answer(first.ID))
		n, err := s.PurgeIdempotency(context.Background(), at(1).Add(2*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("purge: %d, %v; want 1", n, err)
		}
		if n := queryInt(t, s, "SELECT count(*) FROM sends WHERE id = ? AND idem_key IS NULL", first.ID); n != 1 {
			t.Fatalf("the expired send is gone or still holds its record")
		}
		second := newSend("snd_second", core.StatusQueued, at(3))
		second.IdempotencyKey = first.IdempotencyKey
		if d := acceptUnder(t, s, sc, second, at(1).Add(3*time.Hour), answer(second.ID)); d.Outcome != idempotency.Proceed {
			t.Fatalf("the key after expiry: %v, want a new request", d.Outcome)
		}
		requireByKey(t, s, first.IdempotencyKey, second.ID, first.ID)
	})
}

// A key whose record expired but was not purged yet makes a new send too:
// the old send's record is cleared in the same transaction, so the one
// unique index never sees two.
func TestSendRecord_ReuseBeforeThePurgeClearsTheOldRecord(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		first := newSend("snd_first", core.StatusQueued, at(1))
		sc := sendScope(first.IdempotencyKey)
		acceptUnder(t, s, sc, first, at(1), answer(first.ID))
		second := newSend("snd_second", core.StatusQueued, at(3))
		second.IdempotencyKey = first.IdempotencyKey
		later := at(1).Add(2 * time.Hour)
		if d := acceptUnder(t, s, sc, second, later, answer(second.ID)); d.Outcome != idempotency.Proceed {
			t.Fatalf("the expired key: %v, want a new request", d.Outcome)
		}
		if n := queryInt(t, s, "SELECT count(*) FROM sends WHERE idem_key = ?", sc.Key); n != 1 {
			t.Fatalf("%d sends hold the key's record, want 1", n)
		}
		d := decide(t, s, sc, "fp-"+sc.Key, later, nil)
		if d.Outcome != idempotency.Replay || string(d.Response.Body) != `{"id":"snd_second"}` {
			t.Fatalf("retry: %v %+v, want the second send answer", d.Outcome, d.Response)
		}
		requireByKey(t, s, first.IdempotencyKey, second.ID, first.ID)
	})
}

// What makes no send keeps a row of idempotency_keys; a send stored under
// another form of the key (a restricted API key's namespace) is found by
// the caller's key all the same; a request making two sends stores its
// answer in the first.
func TestSendRecord_OtherAnswersAndFormsAndBatches(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		refusal := sendScope("refused-1")
		decide(t, s, refusal, "fp", at(1), &idempotency.Response{Status: 422, Body: []byte(`{}`)})
		if n := queryInt(t, s, "SELECT count(*) FROM idempotency_keys WHERE key = 'refused-1'"); n != 1 {
			t.Fatalf("a stored refusal is not in idempotency_keys")
		}
		if d := decide(t, s, refusal, "fp", at(2), nil); d.Outcome != idempotency.Replay {
			t.Fatalf("the refusal's retry: %v, want a replay", d.Outcome)
		}

		scoped := newSend("snd_scoped", core.StatusQueued, at(1))
		acceptUnder(t, s, sendScope("lim 0123 "+scoped.IdempotencyKey), scoped, at(1), answer(scoped.ID))
		requireByKey(t, s, scoped.IdempotencyKey, scoped.ID)

		a, b := newSend("snd_a", core.StatusQueued, at(1)), newSend("snd_b", core.StatusQueued, at(1))
		b.IdempotencyKey = a.IdempotencyKey
		sc := sendScope(a.IdempotencyKey)
		ctx := context.Background()
		err := s.InTx(ctx, func(tx core.Tx) error {
			d, err := tx.DecideIdempotency(ctx, sc, "fp", at(1))
			if err != nil {
				return err
			}
			for _, sd := range []*core.Send{a, b} {
				if err := tx.InsertSend(ctx, sd); err != nil {
					return err
				}
			}
			return tx.PutIdempotency(ctx, sc, "fp", d.Token, answer("batch"), at(1), at(1).Add(time.Hour))
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := queryInt(t, s, "SELECT count(*) FROM sends WHERE id = 'snd_a' AND idem_key IS NOT NULL"); n != 1 {
			t.Fatalf("the batch's first send does not hold its answer")
		}
		requireByKey(t, s, a.IdempotencyKey, b.ID, a.ID)
	})
}

// rewind0040 takes the schema back to before migration 0040, keeping every
// row: the sends lose their record columns, the lookup by key its old
// index.
func rewind0040(t *testing.T, s *sqlstore.Store) {
	t.Helper()
	stmts := []string{"DROP INDEX sends_idem", "DROP INDEX sends_caller_key", "DROP INDEX sends_idem_expires",
		"CREATE INDEX sends_tenant_idempotency_key ON sends (tenant, idempotency_key)"}
	for _, c := range []string{"method", "route", "key", "fingerprint", "token", "status", "content_type", "body", "expires_at"} {
		stmts = append(stmts, "ALTER TABLE sends DROP COLUMN idem_"+c)
	}
	execAll(t, s, append(stmts, "DELETE FROM sendonce_migrations WHERE version = '0040_send_idempotency_record.sql'")...)
}

// Across the upgrade every key keeps replaying: a send accepted before it
// has its record in idempotency_keys, where the decide step still reads
// it; the lookup by key finds the old send; and the next accept holds its
// own record in its row.
func TestMigration0040_KeysAcceptedBeforeKeepReplaying(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		addr := b.newDB(t)
		s := b.openStore(t, addr)
		old := newSend("snd_old", core.StatusQueued, at(1))
		sc := sendScope(old.IdempotencyKey)
		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.InsertSend(ctx, old) })
		// The record as a release before 0040 wrote it.
		if _, err := s.Exec(context.Background(), `INSERT INTO idempotency_keys
			(tenant, method, route, key, fingerprint, state, token, locked_until, status, content_type, body, created_at, completed_at, expires_at)
			VALUES (?, ?, ?, ?, ?, 'completed', 'tok', ?, 200, 'application/json', ?, ?, ?, ?)`,
			sc.Tenant, sc.Method, sc.Route, sc.Key, "fp-"+sc.Key, at(1).UnixMicro(), []byte(`{"id":"snd_old"}`),
			at(1).UnixMicro(), at(1).UnixMicro(), at(1).Add(time.Hour).UnixMicro()); err != nil {
			t.Fatal(err)
		}
		rewind0040(t, s)
		s.Close()

		s = b.openStore(t, addr) // 0040 runs
		d := decide(t, s, sc, "fp-"+sc.Key, at(2), nil)
		if d.Outcome != idempotency.Replay || string(d.Response.Body) != `{"id":"snd_old"}` {
			t.Fatalf("a key accepted before the upgrade: %v %+v, want its answer replayed", d.Outcome, d.Response)
		}
		requireByKey(t, s, old.IdempotencyKey, old.ID)
		fresh := newSend("snd_new", core.StatusQueued, at(3))
		acceptUnder(t, s, sendScope(fresh.IdempotencyKey), fresh, at(3), answer(fresh.ID))
		if n := queryInt(t, s, "SELECT count(*) FROM sends WHERE id = 'snd_new' AND idem_key IS NOT NULL"); n != 1 {
			t.Fatalf("a send accepted after the upgrade does not hold its record")
		}
		requireByKey(t, s, fresh.IdempotencyKey, fresh.ID)
	})
}

// An accept alone in its group commit writes its send and its record with
// one insert: the row waits for the record, never updated after it (a
// database that refuses every update of sends still accepts).
func TestSendRecord_AnAcceptIsOneInsert(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.openStore(t, b.newDB(t))
		if b.name == "postgres" {
			execAll(t, s, `CREATE FUNCTION no_updates() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RAISE EXCEPTION ''updated''; END'`,
				`CREATE TRIGGER no_updates BEFORE UPDATE ON sends FOR EACH ROW EXECUTE FUNCTION no_updates()`)
		} else {
			execAll(t, s, `CREATE TRIGGER no_updates BEFORE UPDATE ON sends BEGIN SELECT RAISE(ABORT, 'updated'); END`)
		}
		sd := newSend("snd_alone", core.StatusQueued, at(1))
		acceptUnder(t, s, sendScope(sd.IdempotencyKey), sd, at(1), answer(sd.ID))
		if n := queryInt(t, s, "SELECT count(*) FROM sends WHERE id = ? AND idem_key IS NOT NULL", sd.ID); n != 1 {
			t.Fatalf("the send does not hold its record")
		}
	})
}
