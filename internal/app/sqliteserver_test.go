package app_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/server"
)

// sqliteServer wires sendonce as cfg says on a fresh SQLite file of tb's
// temporary directory, closed when tb ends: the tests and benchmarks that
// need the real service and store, not the HTTP API of sendoncetest.
func sqliteServer(tb testing.TB, cfg server.Config) *server.Server {
	tb.Helper()
	cfg.DB = "sqlite:" + filepath.Join(tb.TempDir(), "s.db")
	srv, err := server.New(context.Background(), cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(cctx)
	})
	return srv
}
