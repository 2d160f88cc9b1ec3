package transport_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
	"github.com/sendonce/sendonce/internal/transport"
)

func pooled(t *testing.T, srv *smtptest.Server, maxSessions int) *transport.SMTP {
	t.Helper()
	cfg := config(srv, transport.TLSNone)
	cfg.MaxSessions, cfg.MaxIdle = maxSessions, maxSessions
	s := transport.NewSMTP(cfg)
	t.Cleanup(func() { s.Close() }) // before the server's own check (registered earlier)
	return s
}

// Messages in a row share one session: one connection, every message
// delivered once, and Close ends the session.
func TestSMTPPool_ReusesSessions(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	s := pooled(t, srv, 2)
	for i := range 5 {
		if err := s.Deliver(context.Background(), testEnvelope, testMessage(fmt.Sprintf("reuse-%d@sendonce.test", i))); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if n := srv.Connections(); n != 1 {
		t.Fatalf("%d connections for 5 messages in a row, want 1", n)
	}
	for id, n := range srv.MessageIDCounts() {
		if n != 1 {
			t.Errorf("%s arrived %d times", id, n)
		}
	}
	if n := len(srv.Messages()); n != 5 {
		t.Fatalf("%d messages, want 5", n)
	}
	// Each reused session's earlier envelope is gone (RSET): recipients
	// are exactly the message's own.
	for _, m := range srv.Messages() {
		if len(m.To) != len(testEnvelope.To) {
			t.Errorf("message %s went to %v", m.MessageID, m.To)
		}
	}
}

// A session the relay dropped while it was idle is found dead at RSET and
// replaced; the message goes out once, without an error.
func TestSMTPPool_DeadIdleSessionIsReplaced(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	s := pooled(t, srv, 1)
	if err := s.Deliver(context.Background(), testEnvelope, testMessage("before@sendonce.test")); err != nil {
		t.Fatal(err)
	}
	srv.Disconnect()
	if err := s.Deliver(context.Background(), testEnvelope, testMessage("after@sendonce.test")); err != nil {
		t.Fatalf("after the relay dropped the idle session: %v", err)
	}
	if n := srv.Connections(); n != 2 {
		t.Fatalf("%d connections, want 2 (the dropped one and its replacement)", n)
	}
	if c := srv.MessageIDCounts(); c["after@sendonce.test"] != 1 || c["before@sendonce.test"] != 1 {
		t.Fatalf("messages %v, want each once", c)
	}
}

// A session that failed is never reused.
func TestSMTPPool_FailedSessionIsClosed(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	s := pooled(t, srv, 1)
	srv.SetBehaviour(smtptest.Behaviour{RcptErr: &smtp.SMTPError{Code: 550, Message: "no such user"}})
	err := s.Deliver(context.Background(), testEnvelope, testMessage("refused@sendonce.test"))
	var te *transport.Error
	if !errors.As(err, &te) || te.Class != transport.Permanent {
		t.Fatalf("refused recipient: %v, want a permanent error", err)
	}
	srv.SetBehaviour(smtptest.Behaviour{})
	if err := s.Deliver(context.Background(), testEnvelope, testMessage("next@sendonce.test")); err != nil {
		t.Fatal(err)
	}
	if n := srv.Connections(); n != 2 {
		t.Fatalf("%d connections, want 2: the failed session must not be reused", n)
	}
}

// No more than MaxSessions are open at once, however many Deliver calls
// run; the others wait their turn and all messages arrive.
func TestSMTPPool_BoundsConcurrentSessions(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	srv.SetBehaviour(smtptest.Behaviour{DelayData: 50 * time.Millisecond})
	s := pooled(t, srv, 2)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errs[i] = s.Deliver(ctx, testEnvelope, testMessage(fmt.Sprintf("bound-%d@sendonce.test", i)))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
	if p := srv.PeakConnections(); p > 2 {
		t.Fatalf("%d sessions open at once, want at most 2", p)
	}
	if n := len(srv.Messages()); n != 8 {
		t.Fatalf("%d messages, want 8", n)
	}
}

// A session past its idle time is not reused.
func TestSMTPPool_IdleTimeout(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	cfg := config(srv, transport.TLSNone)
	cfg.MaxSessions, cfg.MaxIdle, cfg.IdleTimeout = 1, 1, 20*time.Millisecond
	s := transport.NewSMTP(cfg)
	t.Cleanup(func() { s.Close() })
	for i := range 2 {
		if err := s.Deliver(context.Background(), testEnvelope, testMessage(fmt.Sprintf("idle-%d@sendonce.test", i))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := srv.Connections(); n != 2 {
		t.Fatalf("%d connections, want 2 (the idle session timed out)", n)
	}
}

func TestParseSMTPURL_MaxSessions(t *testing.T) {
	cfg, err := transport.ParseSMTPURL("smtp://relay.example:587?tls=starttls&max_sessions=7")
	if err != nil || cfg.MaxSessions != 7 || cfg.TLS != transport.TLSStartTLS {
		t.Fatalf("max_sessions=7: %+v %v", cfg, err)
	}
	for _, bad := range []string{"0", "-1", "1001", "x", ""} {
		if _, err := transport.ParseSMTPURL("smtp://relay.example?max_sessions=" + bad); err == nil {
			t.Errorf("max_sessions=%q accepted", bad)
		}
	}
	if _, err := transport.ParseSMTPURL("smtp://relay.example?max_sessions=2&max_sessions=3"); err == nil {
		t.Error("max_sessions twice accepted")
	}
}

// A slot is one of the relay's sessions taken without waiting: none is
// given beyond MaxSessions, a slot delivers like Deliver and frees itself,
// and releasing twice frees only one.
func TestSMTPPool_SlotsAreTakenWithoutWaiting(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	s := pooled(t, srv, 1)
	sl, ok := s.TryAcquire()
	if !ok || !sl.Of(s) {
		t.Fatalf("first slot: ok=%v", ok)
	}
	if _, ok := s.TryAcquire(); ok {
		t.Fatal("a second slot beyond max_sessions=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Deliver(ctx, testEnvelope, testMessage("waits@sendonce.test")); transport.ClassOf(err) != transport.Temporary {
		t.Fatalf("Deliver while the slot is held: %v, want a temporary failure once its wait ends", err)
	}
	if err := sl.Deliver(context.Background(), testEnvelope, testMessage("slot@sendonce.test")); err != nil {
		t.Fatalf("deliver on the slot: %v", err)
	}
	sl.Release() // again: a no-op
	a, ok := s.TryAcquire()
	if !ok {
		t.Fatal("the slot was not freed by its Deliver")
	}
	if _, ok := s.TryAcquire(); ok {
		t.Fatal("a double Release freed two slots")
	}
	a.Release()
	if c := srv.MessageIDCounts(); len(c) != 1 || c["slot@sendonce.test"] != 1 {
		t.Fatalf("messages %v, want only the slot's, once", c)
	}
}
