package delivery_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/delivery"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// The pipelined claim (pipeline.go): each claimed send's envelope is said
// to the relay while the claim commits, its data only after the commit.
// These tests drive the real claim and attempt themselves (NoWorkers)
// against a recording relay and read its transcript.

// saidTo returns a relay behaviour that closes the returned channel when
// the relay is asked for rcpt (RCPT), and takes every message.
func saidTo(rcpt string) (smtptest.Behaviour, <-chan struct{}) {
	said := make(chan struct{})
	var once sync.Once
	return smtptest.Behaviour{RcptFunc: func(_, _, to string) *smtp.SMTPError {
		if to == rcpt {
			once.Do(func() { close(said) })
		}
		return nil
	}}, said
}

func waitSaid(t *testing.T, said <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-said:
	case <-time.After(waitLong):
		t.Fatalf("the relay was never asked %s", what)
	}
}

// verbs is the relay's transcript: each command with its argument.
func verbs(srv *smtptest.Server) []string {
	var out []string
	for _, c := range srv.Transcript() {
		if c.Arg != "" {
			out = append(out, c.Verb+" "+c.Arg)
		} else {
			out = append(out, c.Verb)
		}
	}
	return out
}

func claim(t *testing.T, env *sendoncetest.Env) []delivery.Claimed {
	t.Helper()
	claimed, _, err := env.Server.Deliver.Claim(context.Background(), 10)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %d sends, %v; want the one", len(claimed), err)
	}
	return claimed
}

// A claimed send's envelope reaches the relay with the claim, before any
// handoff began; its data only comes with the handoff, which runs after
// the claim committed, and then goes straight to DATA on that session.
func TestPipeline_EnvelopeIsSaidWithTheClaimAndDataAtTheHandoff(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, NoWorkers: true})
		b, said := saidTo("ann@example.com")
		env.SMTP.SetBehaviour(b)
		id := send(t, env, sendoncetest.Mail("ann@example.com", "pipelined"))

		claimed := claim(t, env)
		waitSaid(t, said, "RCPT TO:<ann@example.com> with the claim")
		if got := verbs(env.SMTP); slices.Contains(got, "DATA") {
			t.Fatalf("before the handoff the relay saw %q, want no DATA", got)
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM sends WHERE id = ? AND status = 'sending'`, id); n != 1 {
			t.Fatal("the claim returned but its send is not committed sending")
		}
		env.Server.Deliver.Run(context.Background(), claimed[0])

		want := []string{"MAIL sender@example.com", "RCPT ann@example.com", "DATA"}
		if got := verbs(env.SMTP); !slices.Equal(got, want) {
			t.Fatalf("the relay saw %q, want %q (one MAIL, said with the claim)", got, want)
		}
		env.WaitStatus(t, id, waitLong, core.StatusSent)
		if n := len(env.SMTP.Messages()); n != 1 {
			t.Fatalf("%d messages, want 1", n)
		}
	})
}

// A recipient suppressed between the claim and the handoff is left out of
// the message: the envelope said with the claim is discarded (RSET) and
// the message goes out in a new transaction to the others only.
func TestPipeline_EnvelopeChangedSinceTheClaimIsSaidAgain(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, NoWorkers: true})
		b, said := saidTo("bob@example.com")
		env.SMTP.SetBehaviour(b)
		id := send(t, env, map[string]any{"to": "ann@example.com", "cc": "bob@example.com", "subject": "changed", "text": "x"})

		claimed := claim(t, env)
		waitSaid(t, said, "RCPT TO:<bob@example.com> with the claim")
		env.Exec(t, "INSERT INTO suppressions (tenant,address,reason,created_at,id) VALUES ('default','bob@example.com','test',0,'sup_1')")
		env.Server.Deliver.Run(context.Background(), claimed[0])

		want := []string{"MAIL sender@example.com", "RCPT ann@example.com", "RCPT bob@example.com", "RSET",
			"MAIL sender@example.com", "RCPT ann@example.com", "DATA"}
		if got := verbs(env.SMTP); !slices.Equal(got, want) {
			t.Fatalf("the relay saw %q, want %q", got, want)
		}
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 || !slices.Equal(msgs[0].To, []string{"ann@example.com"}) {
			t.Fatalf("relay got %+v, want one message to ann@ only", msgs)
		}
		s := env.WaitStatus(t, id, waitLong, core.StatusSent)
		if got := recipientStatuses(s)["bob@example.com"]; got != "suppressed" {
			t.Errorf("bob@ is %q, want suppressed", got)
		}
	})
}

// A claim whose commit fails sends no data: its sends' envelopes were
// said while the commit was held (before it), and once it failed each is
// discarded (RSET), the session pooled again, and the send stays queued
// as if no claim had been — the next claim delivers it, once. PostgreSQL
// only: a deferred constraint trigger fails the commit itself (after
// every statement of the claim succeeded), and waits on an advisory lock
// the test holds first; SQLite has no trigger that runs at commit.
func TestPipeline_FailedClaimCommitSendsNoData(t *testing.T) {
	pgtest.URL(t)
	env := sendoncetest.Start(t, sendoncetest.Options{Backend: sendoncetest.Postgres, SMTP: true, NoWorkers: true})
	ctx := context.Background()
	key := rand.Int32()
	hold, err := pgx.Connect(ctx, env.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close(ctx)
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_lock(1, $1)`, key); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := hold.Exec(ctx, `SELECT pg_advisory_unlock(1, $1)`, key); err != nil {
				t.Error(err)
			}
		}
	}
	defer unlock()
	env.Exec(t, `CREATE FUNCTION pipeline_commit_fails() RETURNS trigger LANGUAGE plpgsql AS
		'BEGIN PERFORM pg_advisory_xact_lock_shared(1, `+strconv.Itoa(int(key))+`); RAISE EXCEPTION ''injected commit failure''; END'`)
	env.Exec(t, `CREATE CONSTRAINT TRIGGER pipeline_commit_fails AFTER UPDATE ON sends DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW WHEN (NEW.status = 'sending') EXECUTE FUNCTION pipeline_commit_fails()`)

	b, said := saidTo("ann@example.com")
	env.SMTP.SetBehaviour(b)
	id := send(t, env, sendoncetest.Mail("ann@example.com", "commit fails"))
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		claimed, _, err := env.Server.Deliver.Claim(ctx, 10)
		done <- result{len(claimed), err}
	}()
	waitSaid(t, said, "RCPT TO:<ann@example.com> while the claim commits")
	select {
	case r := <-done:
		t.Fatalf("the claim returned (%d, %v) while its commit was held", r.n, r.err)
	default:
	}
	unlock()
	r := <-done
	if r.err == nil || r.n != 0 {
		t.Fatalf("claim: %d sends, %v; want none and the commit's error", r.n, r.err)
	}
	want := []string{"MAIL sender@example.com", "RCPT ann@example.com", "RSET"}
	if got := verbs(env.SMTP); !slices.Equal(got, want) {
		t.Fatalf("the relay saw %q, want %q (no DATA, the envelope discarded)", got, want)
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM sends WHERE id = ? AND status = 'queued' AND tries = 0`, id); n != 1 {
		t.Fatal("after the failed claim the send is not queued with no try")
	}
	if ev := eventTypes(getSend(t, env, id)); slices.Contains(ev, "attempt_started") {
		t.Fatalf("events %v, want no attempt", ev)
	}

	env.Exec(t, `DROP TRIGGER pipeline_commit_fails ON sends`)
	env.DeliverNow(t, id)
	env.WaitStatus(t, id, waitLong, core.StatusSent)
	if c := env.SMTP.MessageIDCounts(); len(c) != 1 || slices.Max(slices.Collect(maps.Values(c))) != 1 {
		t.Fatalf("messages %v, want the one once", c)
	}
	if n := env.SMTP.Connections(); n != 1 {
		t.Fatalf("%d connections, want the discarded session pooled and reused", n)
	}
}
