// Package pgtest gives each test a fresh PostgreSQL database on the server
// named by SENDONCE_TEST_POSTGRES_URL, and drops it afterwards: an empty
// one (NewDatabase), or a copy of a Template built once per test process.
// A process leaves its template behind (go test has no hook for its end);
// the next process to build one drops those over three hours old.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/internal/testkit/daemontest"
)

// EnvVar names the admin connection URL the tests use.
const EnvVar = "SENDONCE_TEST_POSTGRES_URL"

// URL returns the admin URL, or skips the test (saying how to enable it)
// when none is set. CI always sets it.
func URL(t testing.TB) string {
	t.Helper()
	return daemontest.EnvURL(t, EnvVar, "PostgreSQL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
}

// NewDatabase creates an empty database for this test and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, "")
}

// newDatabase creates a database for this test as a copy of template
// (PostgreSQL's own template1, an empty one, when ""), drops it when the
// test ends and returns its URL.
func newDatabase(t testing.TB, template string) string {
	t.Helper()
	admin := URL(t)
	name := "sendonce_t_" + randomHex()
	create := "CREATE DATABASE " + name
	if template != "" {
		create += " TEMPLATE " + template
	}
	if err := adminExec(admin, create); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if err := adminExec(admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return databaseURL(t, admin, name)
}

// adminExec runs one statement on the admin connection.
func adminExec(admin, stmt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL (%s): %w", EnvVar, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, stmt)
	return err
}

// databaseURL is the admin URL with its database replaced by name.
func databaseURL(t testing.TB, admin, name string) string {
	t.Helper()
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvVar, err)
	}
	u.Path = "/" + name
	return u.String()
}

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
