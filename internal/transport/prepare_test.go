package transport_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/emersion/go-smtp"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
	"github.com/sendonce/sendonce/internal/transport"
)

// verbs is the transcript's commands, each with its argument when it has
// one ("MAIL sender@example.com", "DATA").
func verbs(srv *smtptest.Server) []string {
	var out []string
	for _, c := range srv.Transcript() {
		out = append(out, c.Verb+cond(c.Arg != "", " "+c.Arg, ""))
	}
	return out
}

func cond(ok bool, a, b string) string {
	if ok {
		return a
	}
	return b
}

func acquire(t *testing.T, s *transport.SMTP) *transport.Slot {
	t.Helper()
	sl, ok := s.TryAcquire()
	if !ok {
		t.Fatal("no free slot")
	}
	t.Cleanup(sl.Release)
	return sl
}

var preparedSays = []string{"MAIL sender@example.com", "RCPT alice@example.org", "RCPT bob@example.net"}

// prepared starts a transcribing relay, a pool of one session on it and a
// slot of it with testEnvelope prepared: where most of these tests begin.
func prepared(t *testing.T) (*smtptest.Server, *transport.SMTP, *transport.Slot) {
	t.Helper()
	srv := smtptest.Start(t, smtptest.Options{Transcript: true})
	s := pooled(t, srv, 1)
	sl := acquire(t, s)
	if err := sl.Prepare(context.Background(), testEnvelope); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	return srv, s, sl
}

// A prepared envelope is said before the message exists, and the message
// then goes straight to DATA: one MAIL, and the data only when Send came.
func TestSlotPrepare_SendSaysOnlyTheData(t *testing.T) {
	srv, _, sl := prepared(t)
	ctx := context.Background()
	if got := verbs(srv); !slices.Equal(got, preparedSays) {
		t.Fatalf("after Prepare the relay saw %q, want %q", got, preparedSays)
	}
	if err := sl.Send(ctx, testEnvelope, testMessage("prepared@sendonce.test")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got, want := verbs(srv), slices.Concat(preparedSays, []string{"DATA"}); !slices.Equal(got, want) {
		t.Fatalf("the relay saw %q, want %q", got, want)
	}
	if c := srv.MessageIDCounts(); c["prepared@sendonce.test"] != 1 {
		t.Fatalf("messages %v, want the one once", c)
	}
}

// Send with another envelope than the prepared one does not carry the
// message in the prepared transaction: it is discarded (RSET) and the
// message goes to its own envelope's recipients only, on the same session.
func TestSlotPrepare_OtherEnvelopeStartsOver(t *testing.T) {
	srv, _, sl := prepared(t)
	ctx := context.Background()
	alone := transport.Envelope{From: testEnvelope.From, To: []string{"alice@example.org"}}
	if err := sl.Send(ctx, alone, testMessage("changed@sendonce.test")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	want := slices.Concat(preparedSays, []string{"RSET", "MAIL sender@example.com", "RCPT alice@example.org", "DATA"})
	if got := verbs(srv); !slices.Equal(got, want) {
		t.Fatalf("the relay saw %q, want %q", got, want)
	}
	if m := srv.Messages(); len(m) != 1 || !slices.Equal(m[0].To, alone.To) {
		t.Fatalf("messages %+v, want one to %v", m, alone.To)
	}
	if n := srv.Connections(); n != 1 {
		t.Fatalf("%d connections, want the prepared session reused", n)
	}
}

// A slot released with its envelope prepared and no message sent leaves
// nothing open on the relay: the transaction is discarded (RSET) before
// the session goes back to the pool, which the next message then uses.
func TestSlotPrepare_ReleaseDiscardsTheEnvelope(t *testing.T) {
	srv, s, sl := prepared(t)
	ctx := context.Background()
	sl.Release()
	if got, want := verbs(srv), slices.Concat(preparedSays, []string{"RSET"}); !slices.Equal(got, want) {
		t.Fatalf("after Release the relay saw %q, want %q", got, want)
	}
	if err := sl.Prepare(ctx, testEnvelope); err == nil {
		t.Fatal("Prepare on a released slot succeeded")
	}
	if err := s.Deliver(ctx, transport.Envelope{From: testEnvelope.From, To: []string{"carol@example.com"}}, testMessage("next@sendonce.test")); err != nil {
		t.Fatalf("next message: %v", err)
	}
	if m := srv.Messages(); len(m) != 1 || !slices.Equal(m[0].To, []string{"carol@example.com"}) {
		t.Fatalf("messages %+v, want only the next one, to carol", m)
	}
	if n := srv.Connections(); n != 1 {
		t.Fatalf("%d connections, want the released session pooled and reused", n)
	}
}

// A recipient the relay refuses while the envelope is prepared gives Send
// the answer the whole transaction would have given (Deliver's), without
// asking the relay again and without DATA.
func TestSlotPrepare_RefusedRecipientIsSendsAnswer(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Transcript: true})
	s := pooled(t, srv, 1)
	ctx := context.Background()
	refuse := smtptest.Behaviour{RcptErrFor: map[string]*smtp.SMTPError{"bob@example.net": {Code: 550, Message: "no such user"}}}
	srv.SetBehaviour(refuse)
	var whole *transport.Error
	if err := s.Deliver(ctx, testEnvelope, testMessage("whole@sendonce.test")); !errors.As(err, &whole) {
		t.Fatalf("Deliver: %v, want a *transport.Error", err)
	}
	before := len(srv.Transcript())

	sl := acquire(t, s)
	if err := sl.Prepare(ctx, testEnvelope); err == nil {
		t.Fatal("Prepare succeeded although the relay refused a recipient")
	}
	srv.SetBehaviour(smtptest.Behaviour{}) // asked again, the relay would take it
	asked := len(srv.Transcript())
	err := sl.Send(ctx, testEnvelope, testMessage("prepared@sendonce.test"))
	var te *transport.Error
	if !errors.As(err, &te) {
		t.Fatalf("Send: %v, want a *transport.Error", err)
	}
	checkErr(t, te, whole.Class, whole.Stage, whole.Code, whole.Reached)
	if n := len(srv.Transcript()); n != asked {
		t.Errorf("Send asked the relay again: %q", verbs(srv)[asked:])
	}
	if got := verbs(srv)[before:]; slices.Contains(got, "DATA") {
		t.Errorf("the relay saw %q, want no DATA", got)
	}
	if n := len(srv.Messages()); n != 0 {
		t.Fatalf("%d messages, want none", n)
	}
}

// A prepared session the relay dropped before the data costs nothing but
// a new one: the message goes out once, without an error.
func TestSlotPrepare_SessionDeadBeforeDataIsReplaced(t *testing.T) {
	srv, _, sl := prepared(t)
	ctx := context.Background()
	srv.Disconnect()
	if err := sl.Send(ctx, testEnvelope, testMessage("after@sendonce.test")); err != nil {
		t.Fatalf("Send after the relay dropped the prepared session: %v", err)
	}
	if c := srv.MessageIDCounts(); c["after@sendonce.test"] != 1 {
		t.Fatalf("messages %v, want the one once", c)
	}
	if n := srv.Connections(); n != 2 {
		t.Fatalf("%d connections, want 2 (the dropped one and its replacement)", n)
	}
}
