package delivery_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/delivery"
	_ "modernc.org/sqlite" // the "sqlite" driver, to rebase the fixture's times
)

// A fixture database stores absolute times. Left as they were, the day
// after it was made its idempotency keys expire, and 30 days after it its
// sends fall to the retention purge a few seconds into the test: the test
// turns red on a date. rebaseFixtureTimes moves every time in the fixture
// (every sendonce column of microseconds since the epoch and every River
// timestamp) so the newest event is now, keeping every interval between
// them.
// Time columns are found by name, so a column a later fixture adds is
// moved too, and TestFixture_NoTimeOlderThanRetention says if one is not.
func rebaseFixtureTimes(t *testing.T, path string, now time.Time) {
	t.Helper()
	db := openFixture(t, path)
	cols := fixtureTimeColumns(t, db)
	var newest int64
	for _, c := range cols {
		if c.text || c.future() {
			continue
		}
		var n sql.NullInt64
		if err := db.QueryRow(fmt.Sprintf(`SELECT max(%q) FROM %q`, c.column, c.table)).Scan(&n); err != nil {
			t.Fatalf("read %s.%s: %v", c.table, c.column, err)
		}
		if n.Valid && n.Int64 > newest {
			newest = n.Int64
		}
	}
	if newest == 0 {
		t.Fatal("the fixture has no times to rebase")
	}
	shift := now.UnixMicro() - newest
	for _, c := range cols {
		var q string
		var arg any
		if c.text {
			// River's timestamps are UTC text; SQLite's date functions move
			// them by fractional seconds and keep the millisecond form.
			q = fmt.Sprintf(`UPDATE %q SET %q = strftime('%%Y-%%m-%%d %%H:%%M:%%f', %q, ?1) WHERE %q IS NOT NULL`, c.table, c.column, c.column, c.column)
			arg = fmt.Sprintf("%+.6f seconds", float64(shift)/1e6)
		} else {
			q = fmt.Sprintf(`UPDATE %q SET %q = %q + ?1 WHERE %q IS NOT NULL AND %q > 0`, c.table, c.column, c.column, c.column, c.column)
			arg = shift
		}
		if _, err := db.Exec(q, arg); err != nil {
			t.Fatalf("rebase %s.%s: %v", c.table, c.column, err)
		}
	}
}

type timeColumn struct {
	table, column string
	text          bool // River's "timestamp" text, not microseconds
}

// future says whether the column holds a deadline (an expiry, a lease)
// rather than when something happened: deadlines lie ahead of the newest
// event, so they do not decide where "now" is.
func (c timeColumn) future() bool {
	return c.column == "expires_at" || strings.HasSuffix(c.column, "_until")
}

// fixtureTimeColumns lists the columns that hold times: named `at`, `*_at`
// or `*_until`.
func fixtureTimeColumns(t *testing.T, db *sql.DB) []timeColumn {
	t.Helper()
	rows, err := db.Query(`SELECT m.name, p.name, p.type FROM sqlite_master m, pragma_table_info(m.name) p
		WHERE m.type = 'table' ORDER BY m.name, p.cid`)
	if err != nil {
		t.Fatalf("list the fixture's columns: %v", err)
	}
	defer rows.Close()
	var cols []timeColumn
	for rows.Next() {
		var table, column, typ string
		if err := rows.Scan(&table, &column, &typ); err != nil {
			t.Fatal(err)
		}
		if column != "at" && !strings.HasSuffix(column, "_at") && !strings.HasSuffix(column, "_until") {
			continue
		}
		cols = append(cols, timeColumn{table: table, column: column, text: strings.EqualFold(typ, "timestamp")})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cols
}

func openFixture(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Every time in every fixture database, once rebased, is within the
// retention window of now — so no purge, expiry or lease that runs during a
// test can act on a fixture row because of the day the test runs on. The
// check rebases onto a day a year ahead, so a column the rebase misses
// fails it today, not on the day it would start to matter.
func TestFixture_NoTimeOlderThanRetention(t *testing.T) {
	fixtures, err := filepath.Glob("testdata/*.db")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no fixture databases found (%v)", err)
	}
	now := time.Now().AddDate(1, 0, 0)
	oldest := now.Add(-delivery.DefaultRetention / 2)
	for _, fixture := range fixtures {
		raw, err := os.ReadFile(fixture)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), filepath.Base(fixture))
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		rebaseFixtureTimes(t, path, now)
		db := openFixture(t, path)
		for _, c := range fixtureTimeColumns(t, db) {
			var q string
			if c.text {
				q = fmt.Sprintf(`SELECT CAST(round((julianday(min(%q)) - 2440587.5) * 86400000000) AS INTEGER) FROM %q WHERE %q IS NOT NULL`, c.column, c.table, c.column)
			} else {
				q = fmt.Sprintf(`SELECT min(%q) FROM %q WHERE %q IS NOT NULL AND %q > 0`, c.column, c.table, c.column, c.column)
			}
			var min sql.NullInt64
			if err := db.QueryRow(q).Scan(&min); err != nil {
				t.Fatalf("%s: read %s.%s: %v", fixture, c.table, c.column, err)
			}
			if min.Valid && time.UnixMicro(min.Int64).Before(oldest) {
				t.Errorf("%s: %s.%s keeps %s after the rebase: a purge or expiry can act on it depending on the day the test runs",
					fixture, c.table, c.column, time.UnixMicro(min.Int64).UTC().Format(time.RFC3339))
			}
		}
	}
}
