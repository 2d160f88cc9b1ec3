package sendoncetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// pgTemplate is PostgreSQL's counterpart of sqliteTemplate: a database
// server.OpenStore migrated once per process, copied for each test (its
// migrations cost about half a second of the server's CPU each time).
var pgTemplate = &pgtest.Template{Build: func(url string) error {
	s, err := server.OpenStore(context.Background(), url)
	if err != nil {
		return err
	}
	return s.Close()
}}

// A fresh SQLite database is a copy of one made by server.OpenStore once
// per test process, not a new run of every migration: under the race
// detector the pure-Go SQLite runs the ~40 migrations (the store's and the
// queue's) in about two seconds of CPU, and the suite makes hundreds of
// fresh databases. The copy is the same file OpenStore leaves, made by the
// same code; opening it applies nothing, as it would on any migrated
// database. The tests of the migrations themselves open their own files.
var sqliteTemplate struct {
	once  sync.Once
	bytes []byte
	err   error
}

// copyFreshSQLite writes a migrated, empty database to path, which must
// not exist yet.
func copyFreshSQLite(t testing.TB, path string) {
	t.Helper()
	sqliteTemplate.once.Do(func() { sqliteTemplate.bytes, sqliteTemplate.err = makeSQLiteTemplate() })
	if sqliteTemplate.err != nil {
		t.Fatalf("template database: %v", sqliteTemplate.err)
	}
	if err := os.WriteFile(path, sqliteTemplate.bytes, 0o600); err != nil {
		t.Fatalf("copy the template database: %v", err)
	}
}

// makeSQLiteTemplate migrates a new database in a folder of its own and
// returns its file. Closing the store checkpoints the write-ahead log into
// the file and removes it; a log left behind would hold part of the
// schema, so it is an error rather than a partial copy.
func makeSQLiteTemplate() ([]byte, error) {
	dir, err := os.MkdirTemp("", "sendoncetest-template-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "template.db")
	s, err := server.OpenStore(context.Background(), "sqlite:"+path)
	if err != nil {
		return nil, err
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
		return nil, fmt.Errorf("%s-wal is %d bytes after close", path, st.Size())
	}
	return os.ReadFile(path)
}
