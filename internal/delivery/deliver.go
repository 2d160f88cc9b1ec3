package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/mail"
	"sync"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/transport"
)

// Config is the delivery settings.
type Config struct {
	// DefaultTransport is "capture", "mx" or an smtp:// URL. Defaults to
	// "capture".
	DefaultTransport string
	// MX configures the mx transport. Its timeouts are capped so that an
	// attempt ends before its lease (see attemptBudget).
	MX transport.MXConfig
	// RetryBase is the first retry delay; attempt n waits RetryBase·2^(n−1),
	// with jitter, capped at MaxRetryDelay. Defaults to 5 seconds.
	RetryBase time.Duration
	// MaxRetryDelay caps the backoff. Defaults to 1 hour.
	MaxRetryDelay time.Duration
	// MaxAttempts before a send fails. Defaults to 8.
	MaxAttempts int
	// AttemptLease is how long one attempt may hold a send. Defaults to 30s.
	AttemptLease time.Duration
	// Retention is how long finished sends are kept. Defaults to 30 days.
	Retention time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.DefaultTransport == "" {
		c.DefaultTransport = "capture"
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 5 * time.Second
	}
	if c.MaxRetryDelay <= 0 {
		c.MaxRetryDelay = time.Hour
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 8
	}
	if c.AttemptLease <= 0 {
		c.AttemptLease = 30 * time.Second
	}
	if c.Retention <= 0 {
		c.Retention = 30 * 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Deliverer runs attempts.
type Deliverer struct {
	svc     *app.Service
	store   core.Store
	cfg     Config
	metrics *metrics.Metrics
	logger  *slog.Logger

	mx *transport.MX

	mu   sync.Mutex
	smtp map[string]transport.Transport // by URL
}

// NewDeliverer returns a Deliverer. It validates the default transport.
func NewDeliverer(svc *app.Service, cfg Config, m *metrics.Metrics, logger *slog.Logger) (*Deliverer, error) {
	cfg.setDefaults()
	d := &Deliverer{svc: svc, store: svc.Store(), cfg: cfg, metrics: m, logger: logger, smtp: map[string]transport.Transport{}}
	d.mx = transport.NewMX(boundMX(cfg.MX, attemptBudget(cfg.AttemptLease)))
	if cfg.DefaultTransport != "capture" && cfg.DefaultTransport != "mx" {
		if _, err := d.smtpTransport(cfg.DefaultTransport); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// ValidateTransport checks a --transport value.
func ValidateTransport(s string) error {
	switch s {
	case "capture", "mx":
		return nil
	}
	if _, err := transport.ParseSMTPURL(s); err != nil {
		return fmt.Errorf("transport: %w", err)
	}
	return nil
}

func (d *Deliverer) smtpTransport(url string) (transport.Transport, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.smtp[url]; ok {
		return t, nil
	}
	if err := ValidateTransport(url); err != nil {
		return nil, err
	}
	cfg, err := transport.ParseSMTPURL(url)
	if err != nil {
		return nil, err
	}
	// Relays are long-lived: keep their sessions for the next message,
	// as many as may be open at once.
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultRelaySessions
	}
	cfg.MaxIdle = cfg.MaxSessions
	t := transport.NewSMTP(cfg)
	d.smtp[url] = t
	return t, nil
}

// DefaultRelaySessions bounds the sessions open to one relay when its URL
// has no max_sessions.
const DefaultRelaySessions = 20

// Close ends the relays' idle sessions. Call it after the workers stopped.
func (d *Deliverer) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for url, t := range d.smtp {
		if c, ok := t.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
		delete(d.smtp, url)
	}
	return errors.Join(errs...)
}

// transportFor picks the send's mailbox transport or the default.
func (d *Deliverer) transportFor(ctx context.Context, s *core.Send) (transport.Transport, error) {
	url := d.cfg.DefaultTransport
	mb, err := d.svc.Mailbox(ctx, s.Tenant, s.MailboxID)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, err
	}
	if mb != nil && mb.Transport != "" {
		url = mb.Transport
	}
	switch url {
	case "capture":
		return &capture{store: d.store, send: s, now: d.cfg.Now}, nil
	case "mx":
		return d.mx, nil
	}
	return d.smtpTransport(url)
}

// attemptBudget is how long the mx transport may take in one attempt: the
// lease minus a margin (a fifth, at most 5 seconds) in which the outcome is
// recorded before the rescuer would call the send unknown.
func attemptBudget(lease time.Duration) time.Duration {
	return lease - min(lease/5, 5*time.Second)
}

// boundMX caps the mx transport's timeouts by the attempt budget. A dead
// exchanger may take a third of it, so the next one still gets a chance.
func boundMX(c transport.MXConfig, budget time.Duration) transport.MXConfig {
	limit := func(v, most time.Duration) time.Duration {
		if v <= 0 || v > most {
			return most
		}
		return v
	}
	c.DNSTimeout = limit(c.DNSTimeout, budget/5)
	c.DialTimeout = limit(c.DialTimeout, budget/3)
	c.CommandTimeout = limit(c.CommandTimeout, budget)
	c.DataTimeout = limit(c.DataTimeout, budget)
	return c
}

// Backoff is the delay after failed attempt n (1-based): base·2^(n−1),
// capped, then "equal jitter" (a uniform pick in [d/2, d]) so that sends
// failing together do not retry together while none retries much sooner than
// planned.
func Backoff(base, maxDelay time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	half := d / 2
	return half + rand.N(d-half+1)
}

// ErrRetry is returned (wrapped) when an attempt failed temporarily and the
// job should run again after the backoff.
var ErrRetry = errors.New("delivery will be retried")

// Attempt runs one delivery attempt of the send. attempt counts from 1. It
// returns an error wrapping ErrRetry only when the queue should retry.
func (d *Deliverer) Attempt(ctx context.Context, sendID string, attempt, maxAttempts int) error {
	token := idempotency.NewToken()
	var send *core.Send
	err := d.store.InTx(ctx, func(tx core.Tx) error {
		s, err := tx.SendForUpdate(ctx, sendID)
		if err != nil {
			return err
		}
		now := d.cfg.Now().UTC()
		switch s.Status {
		case core.StatusQueued:
		case core.StatusSending:
			// An earlier attempt began and never finished: its process died.
			// Whether the relay got the message is not known.
			return markUnknown(ctx, tx, s, now, "a worker stopped during an attempt")
		default:
			return nil // decided already (sent, failed, unknown, canceled…)
		}
		suppressed, err := d.suppressed(ctx, s)
		if err != nil {
			return err
		}
		if suppressed != "" {
			s.Status, s.LastError, s.UpdatedAt = core.StatusFailed, "recipient is suppressed: "+suppressed, now
			if err := tx.UpdateSend(ctx, s); err != nil {
				return err
			}
			return tx.AddEvent(ctx, s.ID, core.Event{Type: "suppressed", At: now, Detail: s.LastError})
		}
		lease := now.Add(d.cfg.AttemptLease)
		s.Status, s.AttemptToken, s.LeaseUntil, s.UpdatedAt = core.StatusSending, token, &lease, now
		if err := tx.UpdateSend(ctx, s); err != nil {
			return err
		}
		if err := tx.AddEvent(ctx, s.ID, core.Event{Type: "attempt_started", At: now, Detail: fmt.Sprintf("attempt %d", attempt)}); err != nil {
			return err
		}
		send = s
		return nil
	})
	if err != nil {
		return fmt.Errorf("begin attempt: %w", err)
	}
	if send == nil {
		return nil
	}

	derr := d.deliver(ctx, send)
	class := transport.Class(0)
	reached := derr == nil
	var terr *transport.Error
	if derr != nil {
		class = transport.ClassOf(derr)
		if errors.As(derr, &terr) {
			reached = terr.Reached
		}
	}
	retry := false
	// The outcome is written even when the attempt's own context ended:
	// losing it would turn a known result into unknown.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = d.store.InTx(wctx, func(tx core.Tx) error {
		s, err := tx.SendForUpdate(wctx, sendID)
		if err != nil {
			return err
		}
		if s.AttemptToken != token || s.Status != core.StatusSending {
			// Our lease ran out and the send was declared unknown (and maybe
			// reconciled since). Reconcile is the only way out of unknown,
			// so the late outcome is recorded for the person who decides,
			// and changes nothing.
			detail := "a late attempt result arrived after the lease: the relay answered 250"
			if derr != nil {
				detail = "a late attempt result arrived after the lease: " + derr.Error()
			}
			return tx.AddEvent(wctx, sendID, core.Event{Type: "late_attempt_result", At: d.cfg.Now().UTC(), Detail: detail})
		}
		now := d.cfg.Now().UTC()
		s.AttemptToken, s.LeaseUntil, s.UpdatedAt = "", nil, now
		if reached {
			s.Attempts++
		}
		var ev core.Event
		switch {
		case derr == nil:
			s.Status, s.SentAt, s.LastError = core.StatusSent, &now, ""
			ev = core.Event{Type: "sent", Detail: fmt.Sprintf("attempt %d accepted by the next hop", attempt)}
			d.count("sent")
		case class == transport.Permanent:
			s.Status, s.LastError = core.StatusFailed, derr.Error()
			ev = core.Event{Type: "failed", Detail: derr.Error()}
			d.count("permfail")
		case class == transport.Ambiguous:
			s.Status, s.LastError = core.StatusUnknown, derr.Error()
			ev = core.Event{Type: "unknown", Detail: derr.Error()}
			d.count("unknown")
		case attempt >= maxAttempts:
			s.Status, s.LastError = core.StatusFailed, fmt.Sprintf("gave up after %d attempts: %v", attempt, derr)
			ev = core.Event{Type: "failed", Detail: s.LastError}
			d.count("tempfail")
		default:
			s.Status, s.LastError = core.StatusQueued, derr.Error()
			ev = core.Event{Type: "attempt_failed", Detail: derr.Error()}
			d.count("tempfail")
			retry = true
		}
		ev.At = now
		if err := tx.UpdateSend(wctx, s); err != nil {
			return err
		}
		return tx.AddEvent(wctx, sendID, ev)
	})
	if err != nil {
		// The result could not be recorded; the send stays "sending" and the
		// rescuer will call it unknown, which is the truth as far as the
		// database knows.
		return fmt.Errorf("record attempt result: %w", err)
	}
	d.logger.LogAttrs(ctx, slog.LevelInfo, "delivery attempt",
		slog.String("send_id", sendID), slog.Int("attempt", attempt), slog.Bool("ok", derr == nil),
		slog.String("class", classString(derr, class)))
	if retry {
		return fmt.Errorf("%w: %v", ErrRetry, derr)
	}
	return nil
}

func classString(err error, c transport.Class) string {
	if err == nil {
		return "sent"
	}
	return c.String()
}

func (d *Deliverer) count(outcome string) {
	if d.metrics != nil {
		d.metrics.DeliveryAttempts.WithLabelValues(outcome).Inc()
	}
}

func (d *Deliverer) suppressed(ctx context.Context, s *core.Send) (string, error) {
	for _, list := range [][]string{s.To, s.Cc, s.Bcc} {
		for _, r := range list {
			a, err := mail.ParseAddress(r)
			if err != nil {
				continue
			}
			ok, err := d.store.IsSuppressed(ctx, s.Tenant, a.Address)
			if err != nil {
				return "", err
			}
			if ok {
				return a.Address, nil
			}
		}
	}
	return "", nil
}

func (d *Deliverer) deliver(ctx context.Context, s *core.Send) error {
	raw, env, err := Render(s)
	if err != nil {
		return &transport.Error{Class: transport.Permanent, Stage: "render", Err: err}
	}
	// The DKIM signature carries its signing time (t=): the one part of
	// the message that differs from one attempt to the next.
	raw, signed, err := d.svc.SignDKIM(ctx, s.Tenant, env.From, raw)
	if err != nil {
		// The key may be fixed (or the secret set) before the next attempt.
		// The error never contains key material.
		d.logger.WarnContext(ctx, "dkim signing failed", slog.String("send_id", s.ID), slog.Any("error", err))
		return &transport.Error{Class: transport.Temporary, Stage: "sign", Err: err}
	}
	t, err := d.transportFor(ctx, s)
	if err != nil {
		return &transport.Error{Class: transport.Temporary, Stage: "dial", Err: err}
	}
	if t == d.mx {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, attemptBudget(d.cfg.AttemptLease))
		defer cancel()
	}
	d.logger.LogAttrs(ctx, slog.LevelDebug, "handing over", slog.String("send_id", s.ID), slog.Bool("dkim_signed", signed))
	return t.Deliver(ctx, env, raw)
}

// Render builds the message and its envelope from a stored send. It is
// deterministic: every attempt of one send renders the same bytes (the
// DKIM signature, when there is one, is added afterwards).
func Render(s *core.Send) ([]byte, transport.Envelope, error) {
	from, err := mail.ParseAddress(s.From)
	if err != nil {
		return nil, transport.Envelope{}, fmt.Errorf("from: %w", err)
	}
	parse := func(list []string) ([]mail.Address, []string, error) {
		var as []mail.Address
		var bare []string
		for _, r := range list {
			a, err := mail.ParseAddress(r)
			if err != nil {
				return nil, nil, fmt.Errorf("address %q: %w", r, err)
			}
			as = append(as, *a)
			bare = append(bare, a.Address)
		}
		return as, bare, nil
	}
	to, toBare, err := parse(s.To)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	cc, ccBare, err := parse(s.Cc)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	_, bccBare, err := parse(s.Bcc)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	replyTo, _, err := parse(s.ReplyTo)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	m := &message.Message{
		From: *from, To: to, Cc: cc, ReplyTo: replyTo, Subject: s.Subject, Text: s.Text, HTML: s.HTML,
		MessageID: s.MessageID, Date: s.CreatedAt, InReplyTo: s.InReplyTo, References: s.References,
	}
	for _, h := range s.Headers {
		m.Headers = append(m.Headers, message.Header{Name: h.Name, Value: h.Value})
	}
	var atts []message.Attachment
	if len(s.Forward) > 0 {
		atts = append(atts, message.Attachment{ContentType: "message/rfc822", Filename: "forwarded.eml", Data: s.Forward})
	}
	raw, err := message.BuildWithAttachments(m, atts)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	rcpt := append(append(toBare, ccBare...), bccBare...)
	return raw, transport.Envelope{From: from.Address, To: rcpt}, nil
}

func markUnknown(ctx context.Context, tx core.Tx, s *core.Send, now time.Time, why string) error {
	s.Status, s.LastError, s.UpdatedAt = core.StatusUnknown, why, now
	// The attempt token stays so that a stalled attempt that finishes
	// after all is recognised and its outcome logged as an event.
	if err := tx.UpdateSend(ctx, s); err != nil {
		return err
	}
	return tx.AddEvent(ctx, s.ID, core.Event{Type: "unknown", At: now, Detail: why})
}

// RescueExpired turns sends whose attempt lease ran out into unknown. It
// returns how many it changed.
func (d *Deliverer) RescueExpired(ctx context.Context) (int, error) {
	n := 0
	err := d.store.InTx(ctx, func(tx core.Tx) error {
		now := d.cfg.Now().UTC()
		sends, err := tx.ExpiredAttempts(ctx, now, 500)
		if err != nil {
			return err
		}
		for _, s := range sends {
			if err := markUnknown(ctx, tx, s, now, "the attempt's lease ran out: its worker stopped or hung"); err != nil {
				return err
			}
			d.count("unknown")
		}
		n = len(sends)
		return nil
	})
	return n, err
}

type capture struct {
	store core.Store
	send  *core.Send
	now   func() time.Time
}

// Deliver keeps the message in the dev inbox.
func (c *capture) Deliver(ctx context.Context, env transport.Envelope, raw []byte) error {
	err := c.store.InTx(ctx, func(tx core.Tx) error {
		return tx.InsertInboxMessage(ctx, &core.InboxMessage{
			ID: app.NewID("msg_"), Tenant: c.send.Tenant, SendID: c.send.ID, MessageID: c.send.MessageID,
			From: env.From, To: env.To, Subject: c.send.Subject, Raw: raw, ReceivedAt: c.now().UTC(),
		})
	})
	if err != nil {
		return &transport.Error{Class: transport.Temporary, Stage: "capture", Err: err}
	}
	return nil
}
