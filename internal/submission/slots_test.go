package submission_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/submission"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestSubmission_NoopsDoNotHoldASlot: a NOOP resets the command timeout,
// so a client that never authenticates, or never leaves, could hold its
// slot for ever (200 such clients once took every slot). A connection
// gets AuthTimeout from accept to authenticate and SessionTimeout from
// accept in all, whatever it sends.
func TestSubmission_NoopsDoNotHoldASlot(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, NoWorkers: true})
	const authIn, sessionIn = 600 * time.Millisecond, 4 * time.Second
	server := func(session time.Duration) string {
		sub := submission.New(env.Server.Service, nil, submission.Config{CommandTimeout: 5 * time.Second,
			AuthTimeout: authIn, SessionTimeout: session}, nil)
		return serve(t, sub, "127.0.0.1:0", false)
	}
	dialNoAuth := func(addr string) *smtp.Client {
		c, err := dialHello(t, addr, "client.example")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// noopUntilClosed sends a NOOP every 100 ms and returns how long after
	// start the server closed the connection, at most within.
	noopUntilClosed := func(c *smtp.Client, start time.Time, within time.Duration) time.Duration {
		for time.Since(start) < within {
			if err := c.Noop(); err != nil {
				return time.Since(start)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return within
	}
	// Only the auth timeout can close this one: its session may last an
	// hour.
	anonAddr := server(time.Hour)
	start := time.Now()
	anon := dialNoAuth(anonAddr)
	if held := noopUntilClosed(anon, start, 10*time.Second); held >= 10*time.Second {
		t.Errorf("an unauthenticated connection sending NOOPs was kept %v (auth timeout %v)", held, authIn)
	}
	// Times from the dial, which is before the accept: a connection
	// whose auth deadline AUTH did not lift closes about authIn after it,
	// a correct one sessionIn after it, however slow the AUTH.
	authedAddr := server(sessionIn)
	start = time.Now()
	authed := dialNoAuth(authedAddr)
	if err := authed.Auth(sasl.NewPlainClient("", "app", env.AdminKey)); err != nil {
		t.Fatal(err)
	}
	held := noopUntilClosed(authed, start, 15*time.Second)
	if held < sessionIn-time.Second {
		t.Errorf("an authenticated connection was closed %v after its dial, before its session timeout %v", held, sessionIn)
	}
	if held >= 15*time.Second {
		t.Errorf("an authenticated connection sending NOOPs was kept %v (session timeout %v)", held, sessionIn)
	}
}

// TestSubmission_UnauthenticatedPerAddressIsBounded: one client address
// holds at most MaxUnauthenticatedPerIP connections that have not
// authenticated (the next is 421); an authenticated one gives its count
// back, so an application's many sessions from one host are not refused.
func TestSubmission_UnauthenticatedPerAddressIsBounded(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, NoWorkers: true})
	const perIP = 3
	sub := submission.New(env.Server.Service, nil, submission.Config{MaxUnauthenticatedPerIP: perIP}, nil)
	addr := serve(t, sub, "127.0.0.1:0", false)
	dial := func() (*smtp.Client, error) { return dialHello(t, addr, "client.example") }
	var first *smtp.Client
	for i := 0; i < perIP; i++ {
		c, err := dial()
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		if i == 0 {
			first = c
		}
	}
	if _, err := dial(); err == nil {
		t.Fatalf("connection %d from one address without AUTH was served", perIP+1)
	}
	if err := first.Auth(sasl.NewPlainClient("", "app", env.AdminKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(); err != nil {
		t.Fatalf("after one authenticated, a new connection was refused: %v", err)
	}
}

// An application's SMTP pool, or a relay delivering in parallel (Postfix
// opens 20 sessions by default), connects all its sessions at once, before
// any has authenticated: with the default limits all twenty are served and
// deliver. Past the per-address limit, the 421 says which limit it is.
func TestSubmission_TwentyConnectionPoolFromOneHostIsServed(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, NoWorkers: true})
	sub := submission.New(env.Server.Service, nil, submission.Config{}, nil)
	addr := serve(t, sub, "127.0.0.1:0", false)
	const pool = 20
	clients := make([]*smtp.Client, pool)
	for i := range clients { // every session greeted before any authenticates
		c, err := dialHello(t, addr, "pool.example")
		if err != nil {
			t.Fatalf("pool connection %d of %d: %v", i+1, pool, err)
		}
		clients[i] = c
	}
	for i, c := range clients {
		if err := c.Auth(sasl.NewPlainClient("", "app", env.AdminKey)); err != nil {
			t.Fatalf("pool connection %d: AUTH: %v", i+1, err)
		}
		if _, err := submit(c, "sender@example.com", []string{"ann@example.com"}, mail(newMsgID(), fmt.Sprint("pool message ", i))); err != nil {
			t.Fatalf("pool connection %d: %v", i+1, err)
		}
	}

	limited := submission.New(env.Server.Service, nil, submission.Config{MaxUnauthenticatedPerIP: 1}, nil)
	laddr := serve(t, limited, "127.0.0.1:0", false)
	if _, err := dialHello(t, laddr, "pool.example"); err != nil {
		t.Fatal(err)
	}
	_, err := dialHello(t, laddr, "pool.example") // the greeting is read at EHLO
	if code(err) != 421 || !strings.Contains(err.Error(), "not authenticated yet (limit 1") {
		t.Fatalf("past the per-address limit: %v, want 421 naming the limit", err)
	}
}
