package cli_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// migrationStore is one kind of database for the migrate tests: a fresh
// one, and how many tables it has.
type migrationStore struct {
	name   string
	fresh  func(t *testing.T) string
	tables func(t *testing.T, dsn string) int
}

var migrationStores = []migrationStore{
	{"sqlite absent", func(t *testing.T) string { return sqliteDSN(t) }, sqliteTables},
	{"sqlite empty file", func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "s.db")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return "sqlite:" + path
	}, sqliteTables},
	{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) }, pgTables},
}

// sqliteTables counts the tables of an SQLite database file; -1 when the
// file does not exist.
func sqliteTables(t *testing.T, dsn string) int {
	t.Helper()
	path := strings.TrimPrefix(dsn, "sqlite:")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return -1
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'table'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func pgTables(t *testing.T, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var tallyRE = regexp.MustCompile(`(?m)^(\d+) applied, (\d+) pending$`)

// migrationRows reads migrate --status: the rows by status, and the
// tally's two counts.
func migrationRows(t *testing.T, out string) (rows map[string][]string, applied, pending int) {
	t.Helper()
	m := tallyRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no \"N applied, M pending\" line in\n%s", out)
	}
	applied, _ = strconv.Atoi(m[1])
	pending, _ = strconv.Atoi(m[2])
	rows = map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || (f[0] != "sendonce" && f[0] != "river") {
			continue
		}
		rows[f[len(f)-2]] = append(rows[f[len(f)-2]], line)
	}
	return rows, applied, pending
}

// TestMigrateStatus_ListsWithoutApplying: on a fresh database migrate
// --status lists every migration (the store's and the queue's) pending and
// creates nothing; after migrate it lists the same ones applied, the
// store's with the time, and migrate again applies none.
func TestMigrateStatus_ListsWithoutApplying(t *testing.T) {
	for _, st := range migrationStores {
		t.Run(st.name, func(t *testing.T) {
			db := st.fresh(t)
			tablesBefore := st.tables(t, db)
			r := runCLI(t, nil, "migrate", "--status", "--db", db)
			if r.err != nil {
				t.Fatalf("migrate --status: %v\n%s", r.err, r.stderr)
			}
			rows, applied, pending := migrationRows(t, r.stdout)
			if applied != 0 || pending < 30 || len(rows["pending"]) != pending || len(rows["applied"]) != 0 {
				t.Fatalf("fresh database: %d applied, %d pending (%d rows pending); want none applied, every one pending:\n%s",
					applied, pending, len(rows["pending"]), r.stdout)
			}
			if !strings.Contains(r.stdout, "sendonce  0001_init.sql") || !strings.Contains(r.stdout, "river ") {
				t.Errorf("status lacks the store's first migration or the queue's:\n%s", r.stdout)
			}
			if got := st.tables(t, db); got != tablesBefore {
				t.Fatalf("migrate --status changed the database: %d tables, had %d", got, tablesBefore)
			}

			if r := runCLI(t, nil, "migrate", "--db", db); r.err != nil || !strings.Contains(r.stdout, "applied "+strconv.Itoa(pending)+" now") {
				t.Fatalf("migrate: %v\n%s%s", r.err, r.stdout, r.stderr)
			}
			r = runCLI(t, nil, "migrate", "--status", "--db", db)
			if r.err != nil {
				t.Fatalf("migrate --status: %v\n%s", r.err, r.stderr)
			}
			rows, applied, pending2 := migrationRows(t, r.stdout)
			if applied != pending || pending2 != 0 || len(rows["applied"]) != pending {
				t.Fatalf("migrated database: %d applied, %d pending; want %d applied, none pending:\n%s", applied, pending2, pending, r.stdout)
			}
			for _, line := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(line, "sendonce ") && !regexp.MustCompile(`applied\s+\d{4}-\d\d-\d\dT`).MatchString(line) {
					t.Errorf("store migration without its time: %q", line)
				}
			}
			if r := runCLI(t, nil, "migrate", "--db", db); r.err != nil || !strings.Contains(r.stdout, "applied 0 now") {
				t.Errorf("migrate on a migrated database: %v\n%s", r.err, r.stdout)
			}
		})
	}
}

// TestMigrateStatus_NamesMigrationsOfANewerVersion: a migration the
// database records but this binary does not know (a newer version applied
// it, and this one is a rollback) is listed as such.
func TestMigrateStatus_NamesMigrationsOfANewerVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db := "sqlite:" + path
	if r := runCLI(t, nil, "migrate", "--db", db); r.err != nil {
		t.Fatalf("migrate: %v\n%s", r.err, r.stderr)
	}
	conn, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec("INSERT INTO sendonce_migrations (version, applied_at) VALUES ('9999_from_the_future.sql', 0)")
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "migrate", "--status", "--db", db)
	if r.err != nil {
		t.Fatalf("migrate --status: %v\n%s", r.err, r.stderr)
	}
	if !regexp.MustCompile(`9999_from_the_future\.sql\s+applied, unknown to this binary`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "0 pending, 1 unknown to this binary") {
		t.Errorf("status does not name the newer migration:\n%s", r.stdout)
	}
}
