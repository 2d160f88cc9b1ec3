// Package pgtest gives each test a fresh PostgreSQL database on the server
// named by SENDONCE_TEST_POSTGRES_URL, and drops it afterwards.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/internal/testkit/daemontest"
	"github.com/sendonce/sendonce/internal/testkit/tcpproxy"
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
	admin := URL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "sendonce_t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to PostgreSQL (%s): %v", EnvVar, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvVar, err)
	}
	u.Path = "/" + name
	return u.String()
}

// NewDatabaseBehindProxy is NewDatabase reached through a tcpproxy, for
// outage tests: the proxy's Cut makes the database unreachable, cutting
// every connection and refusing new ones as a restart does, and Pass
// brings it back. It returns the database's URL through the proxy.
func NewDatabaseBehindProxy(t testing.TB) (string, *tcpproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	px, err := tcpproxy.Start(u.Host, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	u.Host = px.Addr
	return u.String(), px
}
