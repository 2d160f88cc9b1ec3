package server_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// readyz asks GET /readyz and returns the status and the body, which must
// be JSON with exactly the contract's fields: a class, never error text.
func readyz(t *testing.T, base string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]string
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("GET /readyz: %d %q is not a JSON object of strings: %v", resp.StatusCode, raw, err)
	}
	want := []string{"status"}
	if resp.StatusCode != http.StatusOK {
		want = []string{"reason", "status"}
	}
	if got := slices.Sorted(maps.Keys(body)); !slices.Equal(got, want) {
		t.Fatalf("GET /readyz: %d %s: fields %v, want %v", resp.StatusCode, raw, got, want)
	}
	return resp.StatusCode, body
}

func wantReady(t *testing.T, base, when string) {
	t.Helper()
	if code, body := readyz(t, base); code != http.StatusOK || body["status"] != "ready" {
		t.Fatalf("%s: /readyz %d %v, want 200 ready", when, code, body)
	}
}

func wantNotReady(t *testing.T, base, when, reason string) {
	t.Helper()
	if code, body := readyz(t, base); code != http.StatusServiceUnavailable || body["status"] != "not_ready" || body["reason"] != reason {
		t.Fatalf("%s: /readyz %d %v, want 503 not_ready %q", when, code, body, reason)
	}
}

// TestReadyz_StartingThenReadyThenDraining: the API answers before Start
// binds the rest of the process's listeners, and /readyz says "starting"
// until then; after Drain it says "draining" while /healthz stays 200
// (alive, just leaving rotation).
func TestReadyz_StartingThenReadyThenDraining(t *testing.T) {
	ctx := context.Background()
	s, err := server.New(ctx, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "s.db"), Transport: "capture",
		InboundAddr: "127.0.0.1:0", BounceDomain: "bounces.example.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	api := httptest.NewServer(s.Handler)
	defer api.Close()
	defer s.Dashboard.Close()

	wantNotReady(t, api.URL, "before Start", "starting")
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if s.InboundAddr == "" {
		t.Fatal("Start returned before the inbound listener was bound")
	}
	wantReady(t, api.URL, "after Start")
	s.Drain()
	wantNotReady(t, api.URL, "after Drain", "draining")
	resp, err := http.Get(api.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz while draining: %d, want 200", resp.StatusCode)
	}
}

// TestReadyz_MissingMigrationIsNotReady: a database whose migration table
// lacks the newest migration this binary carries (a rollback, a restore of
// an older backup under a newer binary) is not ready; once the row is back,
// it is again.
func TestReadyz_MissingMigrationIsNotReady(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		wantReady(t, env.URL, "after start")

		var newest string
		var appliedAt int64
		if err := env.Server.Store.QueryRow(context.Background(),
			"SELECT version, applied_at FROM sendonce_migrations ORDER BY version DESC LIMIT 1").Scan(&newest, &appliedAt); err != nil {
			t.Fatal(err)
		}
		env.Exec(t, "DELETE FROM sendonce_migrations WHERE version = ?", newest)
		wantNotReady(t, env.URL, "without "+newest, "migrations")

		env.Exec(t, "INSERT INTO sendonce_migrations (version, applied_at) VALUES (?, ?)", newest, appliedAt)
		wantReady(t, env.URL, "with "+newest+" back")
	})
}

// TestReadyz_DatabaseOutageIsNotReady: while PostgreSQL cannot be reached
// (a proxy in front of it cuts every connection and refuses new ones, as
// a restart does) /readyz answers 503 "database" within its own timeout;
// once the database is back, 200.
func TestReadyz_DatabaseOutageIsNotReady(t *testing.T) {
	env, px := sendoncetest.StartBehindProxy(t, sendoncetest.Options{NoWorkers: true})
	wantReady(t, env.URL, "after start")

	px.Cut()
	began := time.Now()
	wantNotReady(t, env.URL, "during the outage", "database")
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("/readyz took %v during the outage; its database check is bounded", took)
	}
	px.Pass()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, _ := readyz(t, env.URL)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d 20s after the database came back", code)
		}
	}
}
