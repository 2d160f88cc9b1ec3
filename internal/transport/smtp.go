package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// quitTimeout bounds the courtesy QUIT: once the outcome is known, a slow
// server must not hold the attempt for a full CommandTimeout.
const quitTimeout = 10 * time.Second

// SMTP delivers to one relay over SMTP. It is safe for concurrent use.
//
// With MaxIdle set it keeps sessions open between messages: a session
// whose message was accepted goes back to the pool, and the next Deliver
// takes it, says RSET — which also proves it still alive — and sends its
// message without a new connect, greeting, TLS handshake, EHLO and AUTH.
// A session that failed in any way is closed, never reused. A session
// found dead at RSET costs nothing but a new one: no message was started
// on it. MaxSessions bounds the sessions open at once.
type SMTP struct {
	cfg SMTPConfig
	sem chan struct{} // one token per open session; nil: no bound

	mu     sync.Mutex
	idle   []*session // most recently used last
	closed bool
}

var _ Transport = (*SMTP)(nil)

// session is an open, authenticated relay session between messages.
type session struct {
	c      *smtp.Client
	nc     net.Conn // the connection go-smtp uses (deadlines)
	raw    net.Conn // the socket (closing aborts everything)
	opened time.Time
	idled  time.Time
}

// NewSMTP returns a relay transport. Configuration errors (no host, unknown
// TLS mode) are reported by Deliver as Temporary errors at the dial stage,
// since they are fixed by the operator, not by changing the message.
func NewSMTP(cfg SMTPConfig) *SMTP {
	s := &SMTP{cfg: cfg.withDefaults()}
	if s.cfg.MaxSessions > 0 {
		s.sem = make(chan struct{}, s.cfg.MaxSessions)
	}
	return s
}

// Close ends the idle sessions (with QUIT) and stops keeping new ones.
func (s *SMTP) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle, s.closed = nil, true
	s.mu.Unlock()
	for _, ss := range idle {
		s.quit(ss)
	}
	return nil
}

func (s *SMTP) quit(ss *session) {
	ss.c.CommandTimeout = min(s.cfg.CommandTimeout, quitTimeout)
	_ = ss.c.Quit()
	ss.raw.Close()
}

// take returns an idle session young enough to reuse, nil when there is
// none; it closes the ones past their time.
func (s *SMTP) take() *session {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.idle) > 0 {
		ss := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if now.Sub(ss.idled) < s.cfg.IdleTimeout && now.Sub(ss.opened) < s.cfg.MaxSessionAge {
			return ss
		}
		ss.raw.Close() // the relay may have dropped it already: no QUIT
	}
	return nil
}

// put keeps a session whose message was accepted, or ends it.
func (s *SMTP) put(ss *session) {
	now := time.Now()
	if err := ss.nc.SetDeadline(time.Time{}); err == nil && now.Sub(ss.opened) < s.cfg.MaxSessionAge {
		s.mu.Lock()
		if !s.closed && len(s.idle) < s.cfg.MaxIdle {
			ss.idled = now
			s.idle = append(s.idle, ss)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
	s.quit(ss)
}

// Deliver sends one message. It returns nil only when the server answered
// 2xx to the end of DATA; otherwise it returns an *Error classified as
// described in the package documentation.
//
// Multiple recipients are all-or-nothing: the first RCPT refused aborts the
// attempt (4xx Temporary, 5xx Permanent) before DATA, so a retry never sends
// the message to the recipients that were accepted.
func (s *SMTP) Deliver(ctx context.Context, env Envelope, raw []byte) error {
	if err := s.precheck(env); err != nil {
		return err
	}
	if s.sem != nil {
		select {
		case s.sem <- struct{}{}:
			defer func() { <-s.sem }()
		case <-ctx.Done():
			return &Error{Class: Temporary, Stage: StageDial, Err: fmt.Errorf("waiting for a free session: %w", context.Cause(ctx))}
		}
	}
	return s.deliver(ctx, nil, env, raw)
}

// Slot is one of a relay's MaxSessions, taken without waiting for it.
// Delivery takes a slot before it commits an attempt as sending, so that
// no attempt the database calls sending waits for a session: a crash then
// leaves unknown only attempts that had a session in hand and were about
// to hand their message over, never ones queued behind the pool. While
// that commit runs, the slot's session may already say the envelope
// (Prepare, prepare.go).
type Slot struct {
	s    *SMTP
	once sync.Once

	mu       sync.Mutex // held by Prepare while it talks to the relay
	prep     *prepared
	released bool
}

// TryAcquire takes one of the relay's MaxSessions if one is free; ok is
// false when all are in use. Without MaxSessions it always succeeds.
func (s *SMTP) TryAcquire() (sl *Slot, ok bool) {
	if s.sem != nil {
		select {
		case s.sem <- struct{}{}:
		default:
			return nil, false
		}
	}
	return &Slot{s: s}, true
}

// Of reports whether the slot is one of t's sessions.
func (sl *Slot) Of(t Transport) bool { return t == Transport(sl.s) }

// Deliver sends one message as SMTP.Deliver does, on the slot instead of
// waiting for one, and releases the slot.
func (sl *Slot) Deliver(ctx context.Context, env Envelope, raw []byte) error {
	defer sl.Release()
	return sl.Send(ctx, env, raw)
}

// precheck refuses, before any session is taken, what no session could
// send: a broken configuration, an impossible envelope.
func (s *SMTP) precheck(env Envelope) error {
	if err := s.cfg.validate(); err != nil {
		return &Error{Class: Temporary, Stage: StageDial, Err: fmt.Errorf("invalid transport configuration: %w", err)}
	}
	if stage, err := checkEnvelope(env); err != nil {
		return &Error{Class: Permanent, Stage: stage, Err: err}
	}
	return nil
}

// deliver sends one message on held (a slot's own session, nil: none), a
// pooled session or a new one; the caller holds one of the MaxSessions.
func (s *SMTP) deliver(ctx context.Context, held *session, env Envelope, raw []byte) error {
	ss, a, stop, err := s.open(ctx, held)
	if err != nil {
		return err
	}
	return s.finish(ss, stop, a.transaction(ctx, ss, env, raw))
}

// open returns a session ready for a transaction: held (a slot's own
// session) or a pooled one once it answered RSET, or else a new one.
// While ctx lives, its end closes the socket; stop ends that watch and
// reports whether it was still in time. On error nothing is left open.
func (s *SMTP) open(ctx context.Context, held *session) (ss *session, a *attempt, stop func() bool, err error) {
	next := func() *session {
		if ss := held; ss != nil {
			held = nil
			return ss
		}
		return s.take()
	}
	for ss := next(); ss != nil; ss = next() {
		a := &attempt{cfg: &s.cfg, stage: StageRset, reached: true, client: ss.c}
		stop := context.AfterFunc(ctx, func() { ss.raw.Close() })
		ss.c.CommandTimeout = s.cfg.CommandTimeout
		if err := ss.c.Reset(); err != nil {
			// Dead or confused: nothing of this message was sent on it.
			stop()
			ss.raw.Close()
			if ctx.Err() != nil {
				return nil, nil, nil, a.fail(ctx, err)
			}
			continue
		}
		return ss, a, stop, nil
	}
	a = &attempt{cfg: &s.cfg, stage: StageDial}
	ss, stop, err = a.session(ctx)
	return ss, a, stop, err
}

// finish pools ss after a transaction that ended with err, or closes it
// when the transaction failed or ctx ended meanwhile (stop is open's).
func (s *SMTP) finish(ss *session, stop func() bool, err error) error {
	if !stop() || err != nil {
		ss.raw.Close()
		return err
	}
	s.put(ss)
	return nil
}

// checkEnvelope refuses envelopes no server could ever accept, so that they
// fail permanently instead of being retried forever.
func checkEnvelope(env Envelope) (stage string, err error) {
	if err := checkAddress(env.From); err != nil {
		return StageMail, fmt.Errorf("invalid envelope sender: %w", err)
	}
	if len(env.To) == 0 {
		return StageRcpt, errors.New("envelope has no recipients")
	}
	for _, to := range env.To {
		if to == "" {
			return StageRcpt, errors.New("empty envelope recipient")
		}
		if err := checkAddress(to); err != nil {
			return StageRcpt, fmt.Errorf("invalid envelope recipient: %w", err)
		}
	}
	return "", nil
}

func checkAddress(addr string) error {
	// Only what would break the command line; the server judges the rest.
	if strings.ContainsAny(addr, "\r\n<>") {
		return fmt.Errorf("%q is not a bare address", addr)
	}
	return nil
}
