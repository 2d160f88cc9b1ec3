package sendoncetest

import (
	"os"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// Backend is a database sendonce runs on.
type Backend string

const (
	SQLite   Backend = "sqlite"
	Postgres Backend = "postgres"
)

// Backends lists the databases a benchmark runs on: SQLite always, and
// PostgreSQL when SENDONCE_TEST_POSTGRES_URL names a server. Without one it
// says so, and under CI (which always sets it) it fails instead.
func Backends(tb testing.TB) []Backend {
	tb.Helper()
	if os.Getenv(pgtest.EnvVar) == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is not set; .ci/run sets it", pgtest.EnvVar)
		}
		tb.Logf("PostgreSQL half skipped: set %s to run it", pgtest.EnvVar)
		return []Backend{SQLite}
	}
	return []Backend{SQLite, Postgres}
}

// EachBackend runs fn as a parallel subtest per backend: one table of
// backends, one copy of each test. Without PostgreSQL configured the
// postgres subtest is skipped with a note on how to enable it.
func EachBackend(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range []Backend{SQLite, Postgres} {
		t.Run(string(b), func(t *testing.T) {
			if b == Postgres {
				pgtest.URL(t) // skips, saying how, when none is configured
			}
			t.Parallel()
			fn(t, b)
		})
	}
}

// EachEnv is EachBackend with the instance started: per backend, fn gets
// a server started with o on that backend (o.Backend is overridden).
func EachEnv(t *testing.T, o Options, fn func(t *testing.T, env *Env)) {
	t.Helper()
	EachBackend(t, func(t *testing.T, b Backend) {
		o := o
		o.Backend = b
		fn(t, Start(t, o))
	})
}
