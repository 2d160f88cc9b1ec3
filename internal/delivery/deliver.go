package delivery

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/mail"
	"slices"
	"time"

	"github.com/emersion/go-smtp"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/internal/transport"
	"github.com/sendonce/sendonce/internal/verp"
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
	// MaxAttempts before a send fails. Defaults to 8. Under mx temporary
	// failures are retried until MaxQueueLifetime instead.
	MaxAttempts int
	// MaxQueueLifetime is how long after it became due a send may wait
	// to be delivered to a destination under mx before it fails there.
	// Defaults to DefaultMaxQueueLifetime.
	MaxQueueLifetime time.Duration
	// AttemptLease is how long one attempt may hold a send. Defaults to 30s.
	AttemptLease time.Duration
	// LeasePerMiB grows a large send's lease per MiB of its files,
	// submitted message and forward (lease.go). Defaults to
	// DefaultLeasePerMiB.
	LeasePerMiB time.Duration
	// Retention is how long finished sends are kept. Defaults to 30 days.
	Retention time.Duration
	// AuditRetention is how long audit entries are kept. Defaults to 90
	// days.
	AuditRetention time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Bounce, when set (--bounce-domain), makes every attempt's envelope
	// sender the send's VERP address.
	Bounce *verp.Signer
	// Fallbacks (--fallback-transport) follow DefaultTransport, in order:
	// each is tried only when those before it definitely did not take the
	// message (providers.go).
	Fallbacks []string
	// ProviderTLS adds trusted roots for provider transports (tests); nil:
	// the system's.
	ProviderTLS *tls.Config
	// TracerProvider takes the attempts' spans (internal/tracing), each a
	// child of the span that accepted its send. Defaults to none: no span
	// is made.
	TracerProvider trace.TracerProvider
}

func (c *Config) setDefaults() {
	defaults.Set(&c.DefaultTransport, transport.DefaultSpec)
	defaults.Set(&c.RetryBase, DefaultRetryBase)
	defaults.Set(&c.MaxRetryDelay, DefaultMaxRetryDelay)
	defaults.Set(&c.MaxAttempts, DefaultMaxAttempts)
	defaults.Set(&c.AttemptLease, DefaultAttemptLease)
	defaults.Set(&c.MaxQueueLifetime, DefaultMaxQueueLifetime)
	defaults.Set(&c.LeasePerMiB, DefaultLeasePerMiB)
	defaults.Set(&c.Retention, DefaultRetention)
	defaults.Set(&c.AuditRetention, DefaultAuditRetention)
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Store is the part of core.Store delivery uses: attempts run in
// transactions (claim and record), read a send's files and the
// suppressions, and the retention loop purges.
type Store interface {
	core.Transactor
	core.Sends
	core.Suppressions
	core.Retention
	core.Providers
}

// Deliverer runs attempts.
type Deliverer struct {
	svc     *app.Service
	store   Store
	cfg     Config
	metrics *metrics.Metrics
	logger  *slog.Logger

	mx *transport.MX
	// defaultKind is what cfg.DefaultTransport names.
	defaultKind transport.Kind

	relays    relays
	providers providerPool
	breakers  breakers

	// onSlotFree, when set (by the Scheduler), is called when an attempt
	// gave its relay session back, before its outcome is written.
	onSlotFree func()

	// large holds a token per attempt of a large message running now
	// (DefaultLargeAttempts).
	large chan struct{}

	// sites is which tenants' sends went to which mx destination
	// (TenantDestinations).
	sites tenantSites

	tracer tracing.Tracer
}

// DefaultLargeAttempts bounds the attempts of large messages (files,
// a submitted message or a forward of LargeMessage bytes or more) that one
// process runs at once. Each holds the files, the encoded message and its
// signed copy in memory (about four times the files). Past it a large send
// is deferred before anything is begun, like one whose relay has no free
// session, and the small ones go on. Two keeps 16 sends of 10 MiB accepted
// and delivered at once under 460 MB of peak RSS (317 MB of it is the
// accepts'); four took 535 MB.
const DefaultLargeAttempts = 2

// LargeMessage is the stored size from which a send counts as large.
const LargeMessage = 1 << 20

// isLarge reports whether s is a large message (DefaultLargeAttempts).
func isLarge(s *core.Send) bool {
	return s.AttachmentCount > 0 || len(s.Raw) >= LargeMessage || len(s.Forward) >= LargeMessage
}

// NewDeliverer returns a Deliverer. It validates the default transport.
func NewDeliverer(svc *app.Service, st Store, cfg Config, m *metrics.Metrics, logger *slog.Logger) (*Deliverer, error) {
	cfg.setDefaults()
	d := &Deliverer{svc: svc, store: st, cfg: cfg, metrics: m, logger: logger, relays: relays{m: map[string]*relay{}, now: time.Now},
		large: make(chan struct{}, DefaultLargeAttempts), tracer: tracing.New(cfg.TracerProvider, "github.com/sendonce/sendonce/internal/delivery")}
	if cfg.MX.Policy == nil {
		cfg.MX.Policy = svc.Outbound()
	}
	d.mx = transport.NewMX(boundMX(cfg.MX, attemptBudget(cfg.AttemptLease), attemptBudget(d.maxLease())))
	spec, err := transport.ParseSpec(cfg.DefaultTransport)
	if err != nil {
		return nil, err
	}
	d.defaultKind = spec.Kind
	if m != nil {
		d.breakers.register(m.Registry)
	} else {
		d.breakers.register(nil)
	}
	if err := checkFallbacks(spec, cfg.Fallbacks); err != nil {
		return nil, err
	}
	if spec.Kind == transport.Relay {
		if _, err := d.smtpTransport(cfg.DefaultTransport, false); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// ValidateTransport checks a --transport value.
func ValidateTransport(s string) error {
	_, err := transport.ParseSpec(s)
	return err
}

// Defaults of Config's zero fields (and of the serve flags that set them).
const (
	// DefaultRetryBase is the first retry's delay; attempt n waits
	// base·2^(n−1) with jitter, capped at DefaultMaxRetryDelay.
	DefaultRetryBase     = 5 * time.Second
	DefaultMaxRetryDelay = time.Hour
	// DefaultMaxAttempts is how many attempts a send gets before failed.
	DefaultMaxAttempts = 8
	// DefaultAttemptLease is how long a worker may hold an attempt before
	// it counts as dead.
	DefaultAttemptLease = 30 * time.Second
	// DefaultRetention is how long finished sends are kept.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultAuditRetention is how long audit entries are kept by default.
	DefaultAuditRetention = 90 * 24 * time.Hour
	// MinAuditRetention is the shortest audit retention allowed: the
	// agent keys' per-day caps count audit entries.
	MinAuditRetention = 48 * time.Hour
)

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
	switch d.defaultKind {
	case transport.Capture:
		return nil, nil
	case transport.Direct:
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
// DATA may take the budget of the longest lease (a large message's): each
// attempt's own budget, its context's deadline, ends a small one sooner.
func boundMX(c transport.MXConfig, budget, dataBudget time.Duration) transport.MXConfig {
	limit := func(v, most time.Duration) time.Duration {
		if v <= 0 || v > most {
			return most
		}
		return v
	}
	c.DNSTimeout = limit(c.DNSTimeout, budget/5)
	c.DialTimeout = limit(c.DialTimeout, budget/3)
	c.CommandTimeout = limit(c.CommandTimeout, budget)
	c.DataTimeout = limit(c.DataTimeout, dataBudget)
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

// suppressed returns the send's recipients that are on its tenant's
// suppression list for the send's stream (an unsubscribe holds back bulk
// mail only), and all its recipients (normalized, each once).
func (d *Deliverer) suppressed(ctx context.Context, s *core.Send) (skipped, all []string, err error) {
	for _, list := range [][]string{s.To, s.Cc, s.Bcc} {
		for _, r := range list {
			a, err := mail.ParseAddress(r)
			if err != nil {
				continue // Render reports it
			}
			addr := core.NormalizeAddress(a.Address)
			if slices.Contains(all, addr) {
				continue
			}
			all = append(all, addr)
			ok, err := d.store.SuppressedFor(ctx, s.Tenant, addr, s.Stream)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				skipped = append(skipped, addr)
			}
		}
	}
	return skipped, all, nil
}

// recordSuppressed writes email.suppressed for each skipped recipient the
// first time it is skipped (a retry does not tell it again).
func recordSuppressed(ctx context.Context, tx core.Tx, sendID string, skipped []string, now time.Time) error {
	if len(skipped) == 0 {
		return nil
	}
	known, err := tx.Recipients(ctx, sendID)
	if err != nil {
		return err
	}
	for _, addr := range skipped {
		if slices.ContainsFunc(known, func(r core.RecipientState) bool {
			return r.Address == addr && r.Status == core.StatusSuppressed
		}) {
			continue
		}
		const why = "the address is on the suppression list: not attempted"
		if err := tx.SetRecipient(ctx, sendID, core.RecipientState{Address: addr, Status: core.StatusSuppressed, Detail: why, UpdatedAt: now}); err != nil {
			return err
		}
		if err := tx.AddEvent(ctx, sendID, core.Event{Type: core.EventSuppressed, At: now, Recipient: addr, Detail: why}); err != nil {
			return err
		}
	}
	return nil
}

// recordRefused writes the recipients the mx transport's exchangers
// refused for good: each bounced (email.bounced with the server's reply),
// and suppressed when the status says the address does not exist.
func recordRefused(ctx context.Context, tx core.Tx, s *core.Send, refused []transport.Refusal, now time.Time) error {
	for _, r := range refused {
		addr := core.NormalizeAddress(r.Recipient)
		status, diag := replyOf(r.Err)
		b := &core.Bounce{Type: core.BouncePermanent, SubType: core.BounceSubType(status), Status: status,
			Message: "the recipient's mail server refused the message for good", DiagnosticCode: []string{diag}}
		detail := status + " " + diag
		if err := tx.SetRecipient(ctx, s.ID, core.RecipientState{Address: addr, Status: core.StatusBounced, Detail: detail, UpdatedAt: now}); err != nil {
			return err
		}
		if err := tx.AddEvent(ctx, s.ID, core.Event{Type: core.EventBounced, At: now, Recipient: addr, Detail: detail, Bounce: b}); err != nil {
			return err
		}
		if core.Suppresses(status) {
			sup := &core.Suppression{ID: app.NewID("sup_"), Tenant: s.Tenant, Address: addr, Reason: "bounce " + detail,
				Origin: core.SuppressionBounce, SendID: s.ID, CreatedAt: now}
			if _, err := tx.AddSuppression(ctx, sup); err != nil {
				return err
			}
		}
	}
	return nil
}

// refusedAddresses are the recipients refusals name.
func refusedAddresses(refused []transport.Refusal) []string {
	out := make([]string, 0, len(refused))
	for _, r := range refused {
		out = append(out, r.Recipient)
	}
	return out
}

// replyOf is a refusal's enhanced status code (the reply's own, else its
// class: "5.0.0") and its diagnostic in DSN form ("smtp; 550 5.1.1 …").
func replyOf(e *transport.Error) (status, diag string) {
	var se *smtp.SMTPError
	if errors.As(e, &se) {
		status = fmt.Sprintf("%d.0.0", se.Code/100)
		if c := se.EnhancedCode; c[0] != 0 && c != smtp.NoEnhancedCode {
			status = fmt.Sprintf("%d.%d.%d", c[0], c[1], c[2])
		}
		return status, fmt.Sprintf("smtp; %d %s %s", se.Code, status, se.Message)
	}
	return "5.0.0", "x-sendonce; " + e.Error()
}

func markUnknown(ctx context.Context, tx core.Tx, s *core.Send, now time.Time, why string) error {
	s.Status, s.LastError, s.UpdatedAt = core.StatusUnknown, why, now
	// The attempt token stays so that a stalled attempt that finishes
	// after all is recognised and its outcome logged as an event.
	if err := tx.UpdateSend(ctx, s); err != nil {
		return err
	}
	return tx.AddEvent(ctx, s.ID, core.Event{Type: core.EventUnknown, At: now, Detail: why})
}

// unknownRecipients marks unknown the recipients (under mx) that a send's
// earlier attempt left to be retried (delayed, queued): the attempt whose
// lease ran out was handing the message to them and may have done so.
// Without it such a recipient kept its old delivery_delayed under an
// unknown send, and a reconcile, which settles the unknown recipients
// only, left it delayed for good.
func unknownRecipients(ctx context.Context, tx core.Tx, sendID string, now time.Time, why string) error {
	states, err := tx.Recipients(ctx, sendID)
	if err != nil {
		return err
	}
	for _, r := range states {
		if doneStatus(r.Status) {
			continue
		}
		r.Status, r.Detail, r.UpdatedAt = core.StatusUnknown, why, now
		if err := tx.SetRecipient(ctx, sendID, r); err != nil {
			return err
		}
	}
	return nil
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
			const why = "the attempt's lease ran out: its worker stopped or hung"
			if err := markUnknown(ctx, tx, s, now, why); err != nil {
				return err
			}
			if err := unknownRecipients(ctx, tx, s.ID, now, why); err != nil {
				return err
			}
			d.count("unknown")
		}
		n = len(sends)
		return nil
	})
	return n, err
}

// dueAt is when a send became due: its scheduled time, else its
// acceptance.
func dueAt(s *core.Send) time.Time {
	if s.ScheduledAt != nil {
		return *s.ScheduledAt
	}
	return s.CreatedAt
}
