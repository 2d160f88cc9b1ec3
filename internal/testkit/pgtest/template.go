package pgtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Template is a database built once per test process and copied (CREATE
// DATABASE … TEMPLATE) for each test that asks for one: a copy costs what
// an empty database does, where building may cost far more (sendonce's
// migrations: about half a second each time).
type Template struct {
	// Build makes the template's contents, given its URL, and closes every
	// connection it opened: PostgreSQL copies no database someone is
	// connected to.
	Build func(url string) error

	once sync.Once
	name string
	err  error
}

// staleTemplate is how old a template must be for a later process to drop
// it: one left by a process that ended (go test gives no hook for the
// end), and far past any test binary's -timeout.
const staleTemplate = 3 * time.Hour

// NewDatabase creates this test's database as a copy of the template,
// building the template first if this process has not yet, and returns
// its URL. The copy is dropped when the test ends.
func (tp *Template) NewDatabase(t testing.TB) string {
	t.Helper()
	admin := URL(t)
	tp.once.Do(func() { tp.name, tp.err = tp.build(t, admin) })
	if tp.err != nil {
		t.Fatalf("template database: %v", tp.err)
	}
	return newDatabase(t, tp.name)
}

// build creates and fills the template under a name that carries its
// creation time, after dropping stale ones.
func (tp *Template) build(t testing.TB, admin string) (string, error) {
	dropStaleTemplates(t, admin)
	name := fmt.Sprintf("sendonce_tmpl_%d_%s", time.Now().Unix(), randomHex())
	if err := adminExec(admin, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	if err := tp.Build(databaseURL(t, admin, name)); err != nil {
		_ = adminExec(admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	return name, nil
}

// dropStaleTemplates drops the templates of processes long gone. A
// failure only leaves them for the next process.
func dropStaleTemplates(t testing.TB, admin string) {
	t.Helper()
	names, err := templateNames(admin)
	if err != nil {
		t.Logf("list template databases: %v", err)
		return
	}
	for _, name := range names {
		ts, _, _ := strings.Cut(strings.TrimPrefix(name, "sendonce_tmpl_"), "_")
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || time.Since(time.Unix(sec, 0)) < staleTemplate {
			continue
		}
		if err := adminExec(admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop stale template %s: %v", name, err)
		}
	}
}

// templateNames lists the databases named as templates are.
func templateNames(admin string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 'sendonce\\_tmpl\\_%'")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
