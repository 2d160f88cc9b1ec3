// Package imapsync keeps connected mailboxes (docs/mailboxes.md) in step:
// each one's INBOX is synced into received messages through the one
// receiving entry point (app.Service.Receive), by one process at a time
// (a lease in the database), and every send from it is filed once in its
// Sent folder (appender.go).
package imapsync

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/imapurl"
	"github.com/sendonce/sendonce/internal/lifecycle"
)

// Receiver stores a message arriving for a mailbox exactly once: the same
// message handed over again is recognised (Received.Duplicate).
// *app.Service satisfies it.
type Receiver interface {
	Receive(ctx context.Context, in app.Incoming) (app.Received, error)
}

// Store is what the syncer reads and writes (app.IMAPStore): each change
// of the lease protocol is its own transaction on the service's side, so
// this door opens none.
type Store interface {
	core.IMAPSyncs
	Mailbox(ctx context.Context, tenant, id string) (*core.Mailbox, error)
	LeaseIMAPSync(ctx context.Context, tenant, mailboxID, holder string, now, until time.Time) (bool, error)
	ReleaseIMAPSync(ctx context.Context, tenant, mailboxID, holder string) error
	SaveIMAPSync(ctx context.Context, holder string, st *core.IMAPSync) (bool, error)
}

// errDisconnected: the mailbox has no imap URL any more (or is gone).
var errDisconnected = errors.New("imapsync: the mailbox is no longer connected")

// Opener opens a mailbox's stored imap URL (*app.Service.MailboxIMAP).
type Opener func(m *core.Mailbox) (cfg imapurl.Config, ok bool, err error)

// Event is a change of a connected mailbox's connection, for the events
// and webhooks of the mailbox ("mailbox.disconnected", "mailbox.connected").
type Event struct {
	Type, Tenant, MailboxID string
	Class                   string // why it disconnected
	At                      time.Time
}

// Event types.
const (
	EventDisconnected = "mailbox.disconnected"
	EventConnected    = "mailbox.connected"
)

// Config configures a Syncer.
type Config struct {
	// Days is how far back the first sync (and one after a UIDVALIDITY
	// change) reaches. Defaults to 30.
	Days int
	// BatchSize is how many messages one FETCH asks for. Defaults to 100.
	BatchSize int
	// MaxPerPass is how many new messages one pass takes; the rest wait
	// for the next pass, at once. Defaults to 1,000.
	MaxPerPass int
	// PassTimeout bounds one pass (SELECT, SEARCH, FETCHes): a server
	// that trickles is cut off. Defaults to 10 minutes.
	PassTimeout time.Duration
	// MaxMessageBytes: a larger message is skipped (and logged). Defaults
	// to app.DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// Lease is how long a process holds a mailbox without renewing it
	// (renewed every third of it). Defaults to 60 s.
	Lease time.Duration
	// PollInterval is how often a server without IDLE is asked for new
	// mail. Defaults to 30 s.
	PollInterval time.Duration
	// IdleRefresh ends an IDLE after this long to look again (and to see
	// that the connection lives). Defaults to 10 minutes.
	IdleRefresh time.Duration
	// Rescan is how often the connected mailboxes are listed again (new
	// ones, ones another process let go). Defaults to 5 s: a mailbox
	// connected through another process starts its first sync within
	// seconds here too.
	Rescan time.Duration
	// Wake, when it delivers, makes the syncer list the connected
	// mailboxes at once: a mailbox connected in this process starts its
	// first sync within a second, not at the next Rescan.
	Wake <-chan struct{}
	// BackoffBase and BackoffMax bound the wait after a failure, doubled
	// per failure in a row. Default 2 s and 5 minutes.
	BackoffBase, BackoffMax time.Duration
	// Holder names this process in the leases. Defaults to a random id.
	Holder string
	// Dial is how servers are reached (the outbound policy's dialer).
	Dial DialOptions
	// OnEvent, when set, is told of connections lost and regained.
	OnEvent func(ctx context.Context, e Event)
	// OnMessage, when set, is called after each message handed over.
	OnMessage func(tenant, mailboxID string)
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	defaults.Set(&c.Days, 30)
	defaults.Set(&c.BatchSize, 100)
	defaults.Set(&c.MaxPerPass, 1000)
	defaults.Set(&c.PassTimeout, 10*time.Minute)
	defaults.Set(&c.MaxMessageBytes, app.DefaultMaxMessageBytes)
	defaults.Set(&c.Lease, time.Minute)
	defaults.Set(&c.PollInterval, 30*time.Second)
	defaults.Set(&c.IdleRefresh, 10*time.Minute)
	defaults.Set(&c.Rescan, 5*time.Second)
	defaults.Set(&c.BackoffBase, 2*time.Second)
	defaults.Set(&c.BackoffMax, 5*time.Minute)
	if c.Holder == "" {
		c.Holder = c.holder()
	}
	defaults.Set(&c.Dial.MaxLiteralBytes, c.MaxMessageBytes+literalSlack)
	if c.Now == nil {
		c.Now = time.Now
	}
}

// holder is a random name for this process in leases.
func (c *Config) holder() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "imapsync-" + hex.EncodeToString(b[:])
}

// Syncer runs one sync per connected mailbox whose lease this process
// holds.
type Syncer struct {
	cfg    Config
	store  Store
	open   Opener
	recv   Receiver
	logger *slog.Logger

	mu      sync.Mutex
	running map[string]bool // tenant\x00mailbox
	// rewake: the last scan was a wake's, so the next comes a second
	// later (Run's goroutine only).
	rewake bool
}

// New returns a Syncer.
func New(store Store, open Opener, recv Receiver, cfg Config, logger *slog.Logger) *Syncer {
	cfg.defaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Syncer{cfg: cfg, store: store, open: open, recv: recv, logger: logger, running: map[string]bool{}}
}

// Run syncs until ctx ends, looking for connected mailboxes every Rescan,
// and returns once every mailbox's sync has stopped and let its lease go.
func (s *Syncer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		mbs, err := s.store.ConnectedMailboxes(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger.Error("imap sync: list connected mailboxes", slog.Any("error", err))
		}
		for _, mb := range mbs {
			k := mb.Tenant + "\x00" + mb.ID
			s.mu.Lock()
			started := s.running[k]
			s.running[k] = true
			s.mu.Unlock()
			if started {
				continue
			}
			wg.Go(func() {
				defer s.recovered(mb)
				(&mailboxSync{s: s, mb: mb}).run(ctx)
				s.mu.Lock()
				delete(s.running, k)
				s.mu.Unlock()
			})
		}
		if !s.wait(ctx) {
			return
		}
	}
}

// wait sleeps until the next scan: Rescan, or a wake — answered twice, at
// once and a second later, since the change that woke it may commit just
// after the first look. false when ctx ended.
func (s *Syncer) wait(ctx context.Context) bool {
	t := time.NewTimer(s.cfg.Rescan)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-s.cfg.Wake:
		s.rewake = true
		return true
	case <-s.after(time.Second):
		return true
	}
}

// after is a one-second recheck after a wake (nil, never, otherwise).
func (s *Syncer) after(d time.Duration) <-chan time.Time {
	if !s.rewake {
		return nil
	}
	s.rewake = false
	return time.After(d)
}

func (s *Syncer) count(mb *core.Mailbox) {
	if s.cfg.OnMessage != nil {
		s.cfg.OnMessage(mb.Tenant, mb.ID)
	}
}

// mailboxSync is the sync of one mailbox in this process.
type mailboxSync struct {
	s     *Syncer
	mb    *core.Mailbox
	state core.IMAPSync
	// since bounds the searches by date while a first sync (or one after
	// a UIDVALIDITY change) takes more than one pass.
	since time.Time
}

// run holds the mailbox's lease while it can and syncs it: a session at a
// time, a failure paused with its class and retried after a backoff. It
// waits for the lease while another process holds it.
func (m *mailboxSync) run(ctx context.Context) {
	s := m.s
	for ctx.Err() == nil {
		held, err := m.lease(ctx)
		if err != nil || !held {
			if err != nil && ctx.Err() == nil {
				s.logger.Error("imap sync: lease", slog.String("mailbox_id", m.mb.ID), slog.Any("error", err))
			}
			if !lifecycle.Sleep(ctx, s.cfg.Lease/3) {
				return
			}
			continue
		}
		// Which process syncs a mailbox is worth a line: with several
		// processes on one database exactly one says so at a time.
		s.logger.Info("imap sync: holding the mailbox", slog.String("tenant", m.mb.Tenant),
			slog.String("mailbox_id", m.mb.ID), slog.String("holder", s.cfg.Holder))
		if m.holding(ctx) {
			return
		}
	}
}

// holding syncs while this process holds the lease, renewing it; it
// returns when the lease is lost or ctx ends, having let the lease go —
// done when the mailbox is no longer connected.
func (m *mailboxSync) holding(ctx context.Context) (done bool) {
	s := m.s
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for lifecycle.Sleep(hctx, s.cfg.Lease/3) {
			if held, err := m.lease(hctx); err == nil && !held {
				cancel() // another process has it: stop at once
				return
			}
		}
	}()
	defer func() {
		cancel()
		<-renewed
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		_ = s.store.ReleaseIMAPSync(rctx, m.mb.Tenant, m.mb.ID, s.cfg.Holder)
	}()
	if st, err := s.store.IMAPSyncState(hctx, m.mb.Tenant, m.mb.ID); err == nil {
		m.state = *st
	} else {
		m.state = core.IMAPSync{Tenant: m.mb.Tenant, MailboxID: m.mb.ID, Status: core.IMAPSyncing}
	}
	for hctx.Err() == nil {
		err := m.safeSession(hctx)
		if errors.Is(err, errDisconnected) {
			return true
		}
		if hctx.Err() != nil || errors.Is(err, errLeaseLost) {
			return false
		}
		if !m.failed(hctx, err) {
			return false
		}
	}
	return false
}

// lease takes or renews the mailbox's lease for this process.
func (m *mailboxSync) lease(ctx context.Context) (bool, error) {
	now := m.s.cfg.Now()
	return m.s.store.LeaseIMAPSync(ctx, m.mb.Tenant, m.mb.ID, m.s.cfg.Holder, now, now.Add(m.s.cfg.Lease))
}

// failed records a session's failure: the mailbox paused with the
// failure's class (an event the first time), then the backoff. False
// when ctx ended meanwhile.
func (m *mailboxSync) failed(ctx context.Context, err error) bool {
	s := m.s
	class := ClassOf(err)
	var se *Error
	if !errors.As(err, &se) {
		// Not the server's: the database or the receiver. Logged in full,
		// told as a class.
		class = "internal_error"
	}
	s.logger.Warn("imap sync failed", slog.String("tenant", m.mb.Tenant), slog.String("mailbox_id", m.mb.ID),
		slog.String("class", class), slog.Any("error", err))
	st := m.state
	first := st.Status != core.IMAPPaused
	st.Status, st.ErrorClass, st.Failures = core.IMAPPaused, class, st.Failures+1
	if serr := m.save(ctx, st); serr != nil {
		return ctx.Err() == nil && !errors.Is(serr, errLeaseLost) && lifecycle.Sleep(ctx, s.cfg.BackoffBase)
	}
	if first && s.cfg.OnEvent != nil {
		s.cfg.OnEvent(ctx, Event{Type: EventDisconnected, Tenant: m.mb.Tenant, MailboxID: m.mb.ID, Class: class, At: s.cfg.Now()})
	}
	return lifecycle.Sleep(ctx, backoff(s.cfg.BackoffBase, s.cfg.BackoffMax, st.Failures))
}

// backoff is base doubled per failure after the first, at most max.
func backoff(base, max time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// session connects, catches up and then waits for new mail (IDLE, or
// polling where the server has none) until the connection fails or ctx
// ends.
func (m *mailboxSync) session(ctx context.Context) error {
	s := m.s
	// Read again each time: the URL may have been replaced (a new
	// password) or removed since.
	mb, err := s.store.Mailbox(ctx, m.mb.Tenant, m.mb.ID)
	if errors.Is(err, core.ErrNotFound) {
		return errDisconnected
	}
	if err != nil {
		return err
	}
	cfg, ok, err := s.open(mb)
	if err != nil {
		return classed(ClassProtocol, errors.New("the mailbox's imap URL cannot be opened"))
	}
	if !ok {
		return errDisconnected
	}
	news := make(chan struct{}, 1)
	handler := &imapclient.UnilateralDataHandler{Mailbox: func(d *imapclient.UnilateralDataMailbox) {
		if d.NumMessages != nil {
			select {
			case news <- struct{}{}:
			default:
			}
		}
	}}
	c, g, err := dial(ctx, cfg, s.cfg.Dial, handler)
	if err != nil {
		return err
	}
	defer c.Close()
	idle := c.Caps().Has(imap.CapIdle) || c.Caps().Has(imap.CapIMAP4rev2)
	for first := true; ; first = false {
		// Each pass selects the inbox again (fresh UIDNEXT, EXISTS and
		// UIDVALIDITY to bound what the search may answer) and has
		// PassTimeout (on the machine's clock: deadlines are the
		// network's, not the injected one's).
		_ = g.SetPassDeadline(time.Now().Add(s.cfg.PassTimeout))
		more, err := m.pass(ctx, c, cfg.Inbox, first)
		_ = g.SetPassDeadline(time.Time{})
		if err != nil {
			return overLimit(g, err)
		}
		if more {
			continue
		}
		if err := m.wait(ctx, c, idle, news); err != nil {
			return overLimit(g, err)
		}
	}
}

// pass selects the inbox and catches up; the first pass of a session
// also ends a pause once it went through.
func (m *mailboxSync) pass(ctx context.Context, c *imapclient.Client, inbox string, first bool) (more bool, err error) {
	s := m.s
	sel, err := c.Select(inbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) {
			return false, classed(ClassFolder, errors.New("the inbox folder cannot be selected"))
		}
		return false, classed(ClassConnection, err)
	}
	if more, err = m.catchUp(ctx, c, sel); err != nil {
		return false, err
	}
	// A pause ends after a whole pass, not at a SELECT: a server that
	// fails each SEARCH stays paused (and its backoff grows).
	if first && m.state.Status == core.IMAPPaused {
		st := m.state
		st.Status, st.ErrorClass, st.Failures = core.IMAPSyncing, "", 0
		if err := m.save(ctx, st); err != nil {
			return false, err
		}
		if s.cfg.OnEvent != nil {
			s.cfg.OnEvent(ctx, Event{Type: EventConnected, Tenant: m.mb.Tenant, MailboxID: m.mb.ID, At: s.cfg.Now()})
		}
	}
	return more, nil
}

// wait returns when there may be new mail: the server said so during
// IDLE, IdleRefresh passed, or (without IDLE) PollInterval passed.
func (m *mailboxSync) wait(ctx context.Context, c *imapclient.Client, idle bool, news <-chan struct{}) error {
	if !idle {
		if !lifecycle.Sleep(ctx, m.s.cfg.PollInterval) {
			return ctx.Err()
		}
		return nil
	}
	cmd, err := c.Idle()
	if err != nil {
		return classed(ClassConnection, err)
	}
	t := time.NewTimer(m.s.cfg.IdleRefresh)
	defer t.Stop()
	select {
	case <-news:
	case <-t.C:
	case <-c.Closed():
	case <-ctx.Done():
	}
	if err := cmd.Close(); err != nil {
		return classed(ClassConnection, err)
	}
	if err := cmd.Wait(); err != nil {
		return classed(ClassConnection, err)
	}
	return ctx.Err()
}
