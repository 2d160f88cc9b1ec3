package app_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
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
	s, err := server.New(ctx, server.Config{
		DB: "sqlite:" + filepath.Join(b.TempDir(), "bench.db"), Transport: "capture", From: "sender@example.com",
		RequireIdempotencyKey: true,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(cctx)
	})
	key, _, err := s.Service.CreateKey(ctx, app.NewKeyParams{Name: "bench", Scopes: []core.Scope{core.ScopeSend}})
	if err != nil {
		b.Fatal(err)
	}
	return s, key
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
// commit, one fsync, per send.
func BenchmarkStoreAccept(b *testing.B) {
	s, key := benchServer(b)
	ctx := context.Background()
	fp, err := idempotency.Fingerprint(benchBody)
	if err != nil {
		b.Fatal(err)
	}
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
// their transactions share commits (group commit).
func BenchmarkStoreAccept_Parallel(b *testing.B) {
	s, key := benchServer(b)
	ctx := context.Background()
	fp, err := idempotency.Fingerprint(benchBody)
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(16) // × GOMAXPROCS (2 here) = 32 callers
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := accept(ctx, s, key, fp, fmt.Sprintf("bench-parallel-%d", n.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkReplayLookup measures the database half of a replay: the
// lock-free read of a completed key (the engine's Lookup) answers Replay
// with its stored response.
func BenchmarkReplayLookup(b *testing.B) {
	s, key := benchServer(b)
	ctx := context.Background()
	fp, err := idempotency.Fingerprint(benchBody)
	if err != nil {
		b.Fatal(err)
	}
	const keys = 64
	for i := range keys {
		if err := accept(ctx, s, key, fp, fmt.Sprintf("bench-replay-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		rec, err := s.Store.CompletedIdempotency(ctx, benchScope(key, fmt.Sprintf("bench-replay-%d", i%keys)))
		if err != nil {
			b.Fatal(err)
		}
		if o := idempotency.Decide(rec, fp, s.Service.Now()); o != idempotency.Replay || rec.Response.Status != http.StatusOK {
			b.Fatalf("outcome %v, record %+v", o, rec)
		}
	}
}

// BenchmarkPrepareSend measures the CPU half of the accept path: validating
// and rendering a request (the default mailbox cached after the first
// call), with a header and a tag so that every step runs.
func BenchmarkPrepareSend(b *testing.B) {
	s, key := benchServer(b)
	ctx := context.Background()
	r := &app.SendRequest{
		To: []string{"Ada <ada@example.com>"}, Cc: []string{"grace@example.com"}, Subject: "Welcome", Text: "Hello Ada!",
		HTML: "<p>Hello Ada!</p>", Headers: map[string]string{"X-Campaign": "welcome"}, Tags: map[string]string{"kind": "welcome"},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Service.PrepareSend(ctx, key, "bench-prepare", r); err != nil {
			b.Fatal(err)
		}
	}
}
