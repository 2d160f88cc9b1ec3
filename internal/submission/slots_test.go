package submission_test

import (
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
	const authIn, sessionIn = 600 * time.Millisecond, 1500 * time.Millisecond
	server := func(session time.Duration) string {
		sub := submission.New(env.Server.Service, nil, submission.Config{CommandTimeout: 5 * time.Second,
			AuthTimeout: authIn, SessionTimeout: session}, nil)
		return serve(t, sub, "127.0.0.1:0", false)
	}
	dialNoAuth := func(addr string) *smtp.Client {
		c, err := smtp.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.Hello("client.example"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// noopUntilClosed sends a NOOP every 100 ms and returns how long the
	// server kept the connection, at most within.
	noopUntilClosed := func(c *smtp.Client, within time.Duration) time.Duration {
		start := time.Now()
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
	anon := dialNoAuth(server(time.Hour))
	if held := noopUntilClosed(anon, 5*time.Second); held >= 5*time.Second {
		t.Errorf("an unauthenticated connection sending NOOPs was kept %v (auth timeout %v)", held, authIn)
	}
	authed := dialNoAuth(server(sessionIn))
	if err := authed.Auth(sasl.NewPlainClient("", "app", env.AdminKey)); err != nil {
		t.Fatal(err)
	}
	held := noopUntilClosed(authed, 5*time.Second)
	if held < authIn {
		t.Errorf("an authenticated connection was closed after %v, at the auth timeout", held)
	}
	if held >= 5*time.Second {
		t.Errorf("an authenticated connection sending NOOPs was kept %v (session timeout %v)", held, sessionIn)
	}
}
