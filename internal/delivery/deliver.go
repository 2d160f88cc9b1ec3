package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/mail"
	"time"

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
	// attempt ends before its lease (see attemptBudget). A nil MX.Policy
	// is the service's outbound policy.
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
	// AuditRetention is how long audit entries are kept. Defaults to 90
	// days.
	AuditRetention time.Duration
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
	if c.AuditRetention <= 0 {
		c.AuditRetention = DefaultAuditRetention
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

	relays relays

	// onSlotFree, when set (by the Scheduler), is called when an attempt
	// gave its relay session back, before its outcome is written.
	onSlotFree func()
}

// NewDeliverer returns a Deliverer. It validates the default transport.
func NewDeliverer(svc *app.Service, cfg Config, m *metrics.Metrics, logger *slog.Logger) (*Deliverer, error) {
	cfg.setDefaults()
	d := &Deliverer{svc: svc, store: svc.Store(), cfg: cfg, metrics: m, logger: logger, relays: relays{m: map[string]*relay{}, now: time.Now}}
	if cfg.MX.Policy == nil {
		cfg.MX.Policy = svc.Outbound()
	}
	d.mx = transport.NewMX(boundMX(cfg.MX, attemptBudget(cfg.AttemptLease)))
	if cfg.DefaultTransport != "capture" && cfg.DefaultTransport != "mx" {
		if _, err := d.smtpTransport(cfg.DefaultTransport, false); err != nil {
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

// DefaultAuditRetention is how long audit entries are kept by default.
const DefaultAuditRetention = 90 * 24 * time.Hour

// DefaultRelaySessions bounds the sessions open to one relay when its URL
// has no max_sessions.
const DefaultRelaySessions = 20

// transportFor picks the send's mailbox transport or the default; nil is
// the capture transport, whose handoff is a write (see handOff).
func (d *Deliverer) transportFor(ctx context.Context, s *core.Send) (transport.Transport, error) {
	url := d.cfg.DefaultTransport
	mb, err := d.svc.Mailbox(ctx, s.Tenant, s.MailboxID)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, err
	}
	if mb != nil && mb.Transport != "" {
		// Set through the API: always an smtp:// URL (CreateMailbox).
		return d.smtpTransport(mb.Transport, true)
	}
	switch url {
	case "capture":
		return nil, nil
	case "mx":
		return d.mx, nil
	}
	return d.smtpTransport(url, false)
}

// attemptBudget is how long one attempt may take, whatever its transport:
// the lease minus a margin (a fifth, at most 5 seconds) in which the
// outcome is recorded before the rescuer would call the send unknown.
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
	for _, a := range s.Attachments {
		atts = append(atts, message.Attachment{ContentType: a.ContentType, Filename: a.Filename, ContentID: a.ContentID, Data: a.Data})
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
