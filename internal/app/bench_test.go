package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/mail"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/server"
)

var benchBody = []byte(`{"to":"Ada <ada@example.com>","subject":"Welcome","text":"Hello Ada!"}`)

// benchServer wires sendonce on a fresh SQLite file, without workers, and
// returns it with a key that may send.
func benchServer(b *testing.B) (*server.Server, *core.APIKey) {
	b.Helper()
	ctx := context.Background()
	s := sqliteServer(b, server.Config{Transport: "capture", From: "sender@example.com", RequireIdempotencyKey: true})
	key, _, err := s.Service.CreateKey(ctx, app.NewKeyParams{Name: "bench", Scopes: []core.Scope{core.ScopeSend}})
	if err != nil {
		b.Fatal(err)
	}
	return s, key
}

// benchFingerprint is benchBody's fingerprint, which every accepted
// benchmark send stores with its key.
func benchFingerprint(b *testing.B) string {
	b.Helper()
	fp, err := idempotency.Fingerprint(benchBody)
	if err != nil {
		b.Fatal(err)
	}
	return fp
}

func benchScope(key *core.APIKey, idemKey string) idempotency.Scope {
	return idempotency.Scope{Tenant: key.Tenant, Method: http.MethodPost, Route: "/v1/send", Key: idemKey}
}

// accept is the accept path of POST /v1/send below HTTP: reserve the key
// (one commit), then the send, its first event, its delivery job and the
// stored response in one transaction (the second commit).
func accept(ctx context.Context, s *server.Server, key *core.APIKey, fp, idemKey string) error {
	sc := benchScope(key, idemKey)
	now := s.Service.Now()
	// As the API does it: prepare outside, then reserve, record and store
	// the answer in one transaction.
	send, err := s.Service.PrepareSend(ctx, key, idemKey, &app.SendRequest{
		To: []string{"Ada <ada@example.com>"}, Subject: "Welcome", Text: "Hello Ada!",
	})
	if err != nil {
		return err
	}
	return s.Store.InTx(ctx, func(tx core.Tx) error {
		d, err := tx.DecideIdempotency(ctx, sc, fp, now)
		if err != nil {
			return err
		}
		if d.Outcome != idempotency.Proceed {
			return fmt.Errorf("reserve %s: outcome %v", idemKey, d.Outcome)
		}
		if err := s.Service.AcceptSend(ctx, tx, key, send); err != nil {
			return err
		}
		resp := idempotency.Response{Status: http.StatusOK, ContentType: "application/json", Body: []byte(`{"id":"` + send.ID + `"}`)}
		return tx.PutIdempotency(ctx, sc, fp, d.Token, resp, now, now.Add(24*time.Hour))
	})
}

// BenchmarkStoreAccept measures accepting one send with a new key on the
// real SQLite store (WAL, synchronous=FULL), one caller at a time: one
// commit, one fsync, per send. Its yardstick is
// BenchmarkStoreAccept_Yardstick.
func BenchmarkStoreAccept(b *testing.B) {
	s, key := benchServer(b)
	ctx := context.Background()
	fp := benchFingerprint(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if err := accept(ctx, s, key, fp, fmt.Sprintf("bench-accept-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreAccept_Parallel is the same with 32 concurrent callers:
// their transactions share commits (group commit). Its yardstick is
// BenchmarkStoreAccept_Parallel_Yardstick.
func BenchmarkStoreAccept_Parallel(b *testing.B) {
	s, key := benchServer(b)
	ctx := context.Background()
	fp := benchFingerprint(b)
	parallel32(b, func(n int64) error { return accept(ctx, s, key, fp, fmt.Sprintf("bench-parallel-%d", n)) })
}

// BenchmarkReplayLookup measures the database half of a replay: the
// lock-free read of a completed key (the engine's Lookup) answers Replay
// with its stored response. Its yardstick is
// BenchmarkReplayLookup_Yardstick.
func BenchmarkReplayLookup(b *testing.B) {
	s, key := benchServer(b)
	ctx := context.Background()
	fp := acceptReplayKeys(ctx, b, s, key)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		rec, err := s.Store.CompletedIdempotency(ctx, benchScope(key, fmt.Sprintf("bench-replay-%d", i%replayKeys)))
		if err != nil {
			b.Fatal(err)
		}
		if o := idempotency.Decide(rec, fp, s.Service.Now()); o != idempotency.Replay || rec.Response.Status != http.StatusOK {
			b.Fatalf("outcome %v, record %+v", o, rec)
		}
	}
}

// prepareBenchRequest has a header and a tag so that every step of
// PrepareSend runs.
var prepareBenchRequest = &app.SendRequest{
	To: []string{"Ada <ada@example.com>"}, Cc: []string{"grace@example.com"}, Subject: "Welcome", Text: "Hello Ada!",
	HTML: "<p>Hello Ada!</p>", Headers: map[string]string{"X-Campaign": "welcome"}, Tags: map[string]string{"kind": "welcome"},
}

// BenchmarkPrepareSend measures the CPU half of the accept path: validating
// and rendering a request (the default mailbox cached after the first
// call). Its yardstick is BenchmarkPrepareSend_Yardstick.
func BenchmarkPrepareSend(b *testing.B) {
	s, key := benchServer(b)
	ctx := context.Background()
	r := prepareBenchRequest
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Service.PrepareSend(ctx, key, "bench-prepare", r); err != nil {
			b.Fatal(err)
		}
	}
}

// yardstickTable makes a one-row-per-call table in the server's database,
// for the yardsticks of the store benchmarks.
func yardstickTable(b *testing.B, s *server.Server) {
	b.Helper()
	if _, err := s.Store.Exec(context.Background(), `CREATE TABLE yardstick (key TEXT PRIMARY KEY, body BLOB NOT NULL)`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStoreAccept_Yardstick is one single-row insert, committed by
// itself, on the same database and connection (WAL, synchronous=FULL):
// the least a durable accept costs. BenchmarkStoreAccept's ns/op over
// this one is how many such commits an accept is worth.
func BenchmarkStoreAccept_Yardstick(b *testing.B) {
	s, _ := benchServer(b)
	yardstickTable(b, s)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := s.Store.Exec(ctx, `INSERT INTO yardstick (key, body) VALUES (?, ?)`, fmt.Sprint("bench-accept-", i), benchBody); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreAccept_Parallel_Yardstick is the same insert from 32
// callers, each committing its own row: no batching. Below 1, the ratio
// of BenchmarkStoreAccept_Parallel to it is what sharing commits gains.
func BenchmarkStoreAccept_Parallel_Yardstick(b *testing.B) {
	s, _ := benchServer(b)
	yardstickTable(b, s)
	ctx := context.Background()
	parallel32(b, func(n int64) error {
		_, err := s.Store.Exec(ctx, `INSERT INTO yardstick (key, body) VALUES (?, ?)`, fmt.Sprint("bench-parallel-", n), benchBody)
		return err
	})
}

// BenchmarkReplayLookup_Yardstick reads the stored answer of the same 64
// keys by their unique index (an accepted send's row), one statement on the read pool: the least a
// lookup of a stored answer costs. The ratio is what CompletedIdempotency
// adds to reading the row (decoding it, deciding the outcome).
func BenchmarkReplayLookup_Yardstick(b *testing.B) {
	s, key := benchServer(b)
	ctx := context.Background()
	acceptReplayKeys(ctx, b, s, key)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		sc := benchScope(key, fmt.Sprintf("bench-replay-%d", i%replayKeys))
		var (
			status int
			ctype  string
			body   []byte
		)
		if err := s.Store.QueryRow(ctx, `SELECT idem_status, idem_content_type, idem_body FROM sends
			WHERE tenant = ? AND idem_key = ? AND idem_method = ? AND idem_route = ?`, sc.Tenant, sc.Key, sc.Method, sc.Route).Scan(&status, &ctype, &body); err != nil {
			b.Fatal(err)
		}
		if status != http.StatusOK {
			b.Fatalf("status %d", status)
		}
	}
}

// BenchmarkPrepareSend_Yardstick parses the same request's addresses
// (its two recipients and the default sender) with net/mail: validation
// no sender can skip. The ratio is PrepareSend's cost in such parses.
func BenchmarkPrepareSend_Yardstick(b *testing.B) {
	r := prepareBenchRequest
	addrs := append(append([]string{"sender@example.com"}, r.To...), r.Cc...)
	b.ReportAllocs()
	for b.Loop() {
		for _, a := range addrs {
			if _, err := mail.ParseAddress(a); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// acceptReplayKeys accepts the 64 keys the replay benchmarks read back and
// returns their body's fingerprint.
func acceptReplayKeys(ctx context.Context, b *testing.B, s *server.Server, key *core.APIKey) string {
	b.Helper()
	fp := benchFingerprint(b)
	for i := range replayKeys {
		if err := accept(ctx, s, key, fp, fmt.Sprintf("bench-replay-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	return fp
}

// replayKeys is how many keys the replay benchmarks cycle through.
const replayKeys = 64

// parallel32 runs op from 32 callers (16 × GOMAXPROCS, 2 here), each call
// with a number of its own.
func parallel32(b *testing.B, op func(n int64) error) {
	var n atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
