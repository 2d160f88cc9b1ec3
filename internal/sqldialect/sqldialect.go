// Package sqldialect names the two SQL databases sendonce speaks and turns
// its SQL, written once with ? placeholders, into what each one takes.
// sqlstore, idempotency and outbox share it (the latter two re-export the
// type and its values), so a dialect is one value across all three.
package sqldialect

import (
	"strconv"
	"strings"
	"sync"
)

// Dialect names a database.
type Dialect string

const (
	// SQLite, through modernc.org/sqlite (driver name "sqlite").
	SQLite Dialect = "sqlite"
	// Postgres is PostgreSQL, through pgx (driver name "pgx").
	Postgres Dialect = "postgres"
)

func (d Dialect) String() string { return string(d) }

// Valid reports whether d is SQLite or Postgres.
func (d Dialect) Valid() bool { return d == SQLite || d == Postgres }

// Rebind returns q for d: PostgreSQL numbers its placeholders ($1, $2, …),
// SQLite takes q's ? as they are. q must have no ? inside a string
// literal or identifier (none of sendonce's SQL has).
func (d Dialect) Rebind(q string) string {
	if d != Postgres {
		return q
	}
	return numbered(q)
}

func numbered(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// Rebinder is Postgres.Rebind with each statement text rebound once: for
// a store whose statements are built at run time but repeat. The zero
// value is ready; it is safe for concurrent use.
type Rebinder struct{ cache sync.Map }

// Rebind is Postgres.Rebind(q), remembered.
func (r *Rebinder) Rebind(q string) string {
	if v, ok := r.cache.Load(q); ok {
		return v.(string)
	}
	out := numbered(q)
	r.cache.Store(q, out)
	return out
}
