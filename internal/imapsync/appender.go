package imapsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/leasequeue"
	"github.com/sendonce/sendonce/internal/render"
)

// The Sent folder. Delivery owes a connected mailbox's send a copy in its
// Sent folder in the transaction that records the send handed off (an
// imap_appends row: QueueIMAPAppend). The appender works those rows, each
// under a lease: it looks for the message in the folder by its Message-ID
// first (SEARCH HEADER Message-ID), appends it only when it is not there,
// and removes the row once the copy is there. An append that happened
// before a crash, whose row was not removed, is found by the search and
// not made again.

// AppendStore is what the appender reads and writes.
type AppendStore interface {
	ClaimIMAPAppends(ctx context.Context, holder string, now, until time.Time, n int) ([]core.IMAPAppend, error)
	FinishIMAPAppend(ctx context.Context, sendID, holder string) error
	RetryIMAPAppend(ctx context.Context, sendID, holder string, at time.Time) error
	Mailbox(ctx context.Context, tenant, id string) (*core.Mailbox, error)
	IMAPAppendsDue(ctx context.Context, now time.Time) (bool, error)
	Send(ctx context.Context, tenant, id string) (*core.Send, error)
	SendAttachments(ctx context.Context, id string) ([]core.Attachment, error)
}

// AppendConfig configures an Appender.
type AppendConfig struct {
	// Poll is how often due appends are looked for. Defaults to 2 s.
	Poll time.Duration
	// Lease is how long a claimed append is this process's. Defaults to
	// 2 minutes: longer than a connect, a search and an append.
	Lease time.Duration
	// MaxAttempts: an append that failed this often is given up (logged).
	// Defaults to 20.
	MaxAttempts int
	// BackoffBase and BackoffMax bound the wait after a failure. Default
	// 5 s and 30 minutes.
	BackoffBase, BackoffMax time.Duration
	Holder                  string // defaults to a random id
	Dial                    DialOptions
	// Workers bounds the appends made at once, each to its own mailbox's
	// server: one slow or hostile server holds one worker, not every
	// tenant's copies. Defaults to 4.
	Workers int
	// BeforeAppend, when set, is called just before an APPEND (tests kill
	// the process there).
	BeforeAppend func(sendID string)
	Now          func() time.Time
}

// Appender files sends in their mailbox's Sent folder.
type Appender struct {
	cfg    AppendConfig
	store  AppendStore
	open   Opener
	logger *slog.Logger
	// runner claims due appends as workers free up (the one lease-queue
	// runner, internal/leasequeue).
	runner *leasequeue.Runner[core.IMAPAppend]
}

// NewAppender returns an Appender.
func NewAppender(store AppendStore, open Opener, cfg AppendConfig, logger *slog.Logger) *Appender {
	defaults.Set(&cfg.Poll, 2*time.Second)
	defaults.Set(&cfg.Lease, 2*time.Minute)
	defaults.Set(&cfg.MaxAttempts, 20)
	defaults.Set(&cfg.BackoffBase, 5*time.Second)
	defaults.Set(&cfg.BackoffMax, 30*time.Minute)
	if cfg.Holder == "" {
		cfg.Holder = (&Config{}).holder()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	defaults.Set(&cfg.Workers, 4)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &Appender{cfg: cfg, store: store, open: open, logger: logger}
	a.runner = leasequeue.New(leasequeue.Config[core.IMAPAppend]{Name: "imap appends", Workers: cfg.Workers, Poll: cfg.Poll,
		Claim: a.claim, Work: a.work, Logger: logger})
	return a
}

// Start works due appends until Stop.
func (a *Appender) Start() { a.runner.Start() }

// Stop stops claiming and waits (bounded by ctx) for the appends under way
// to record what came of them.
func (a *Appender) Stop(ctx context.Context) error { return a.runner.Stop(ctx) }

// claim takes at most n due appends under this process's lease.
func (a *Appender) claim(ctx context.Context, n int) ([]core.IMAPAppend, bool, error) {
	now := a.cfg.Now()
	if due, err := a.store.IMAPAppendsDue(ctx, now); err != nil || !due {
		return nil, false, err
	}
	claimed, err := a.store.ClaimIMAPAppends(ctx, a.cfg.Holder, now, now.Add(a.cfg.Lease), n)
	return claimed, false, err
}

// RunOnce claims due appends and works them one after the other; it
// returns how many. Tests drive the appender with it.
func (a *Appender) RunOnce(ctx context.Context) (int, error) {
	claimed, _, err := a.claim(ctx, 10)
	if err != nil {
		return 0, err
	}
	for _, job := range claimed {
		a.work(ctx, job)
	}
	return len(claimed), nil
}

// work makes one append and records what came of it.
func (a *Appender) work(ctx context.Context, job core.IMAPAppend) {
	actx, cancel := context.WithTimeout(ctx, a.cfg.Lease/2)
	err := a.safeAppend(actx, job)
	cancel()
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer wcancel()
	var werr error
	switch {
	case err == nil:
		werr = a.store.FinishIMAPAppend(wctx, job.SendID, a.cfg.Holder)
	case job.Attempts >= a.cfg.MaxAttempts || errors.Is(err, core.ErrNotFound):
		a.logger.Error("imap append given up", slog.String("send_id", job.SendID), slog.Int("attempts", job.Attempts), slog.Any("error", err))
		werr = a.store.FinishIMAPAppend(wctx, job.SendID, a.cfg.Holder)
	default:
		a.logger.Warn("imap append failed", slog.String("send_id", job.SendID), slog.String("class", ClassOf(err)), slog.Any("error", err))
		at := a.cfg.Now().Add(backoff(a.cfg.BackoffBase, a.cfg.BackoffMax, job.Attempts))
		werr = a.store.RetryIMAPAppend(wctx, job.SendID, a.cfg.Holder, at)
	}
	if werr != nil {
		// The lease runs out and the append is claimed again: the search
		// finds the copy if it was made.
		a.logger.Error("imap append: record", slog.String("send_id", job.SendID), slog.Any("error", werr))
	}
}

// appendOnce puts the send's message in the Sent folder unless a message
// with its Message-ID is there already.
func (a *Appender) appendOnce(ctx context.Context, job core.IMAPAppend) error {
	mb, err := a.store.Mailbox(ctx, job.Tenant, job.MailboxID)
	if err != nil {
		return err
	}
	cfg, ok, err := a.open(mb)
	if err != nil || !ok {
		return fmt.Errorf("%w: the mailbox is no longer connected", core.ErrNotFound)
	}
	send, err := a.store.Send(ctx, job.Tenant, job.SendID)
	if err != nil {
		return err
	}
	if send.AttachmentCount > 0 {
		if send.Attachments, err = a.store.SendAttachments(ctx, send.ID); err != nil {
			return err
		}
	}
	if send.MessageID == "" {
		// Nothing to search by: an append could not be told from one
		// made before a crash.
		return fmt.Errorf("%w: the send has no Message-ID", core.ErrNotFound)
	}
	raw, _, err := render.Message(send)
	if err != nil {
		return fmt.Errorf("render send: %w", err)
	}
	c, err := Dial(ctx, cfg, a.cfg.Dial, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	folder, err := sentFolder(c, cfg.Sent)
	if err != nil {
		return err
	}
	if there, err := holds(c, folder, send.MessageID); err != nil || there {
		return err
	}
	if a.cfg.BeforeAppend != nil {
		a.cfg.BeforeAppend(job.SendID)
	}
	cmd := c.Append(folder, int64(len(raw)), &imap.AppendOptions{Flags: []imap.Flag{imap.FlagSeen}, Time: sentTime(send)})
	if _, err := cmd.Write(raw); err != nil {
		return classed(ClassConnection, err)
	}
	if err := cmd.Close(); err != nil {
		return classed(ClassConnection, err)
	}
	if _, err := cmd.Wait(); err != nil {
		return classed(ClassProtocol, fmt.Errorf("append: %w", err))
	}
	_ = c.Logout().Wait()
	return nil
}

// holds reports whether folder has a message with Message-ID id.
func holds(c *imapclient.Client, folder, id string) (bool, error) {
	if _, err := c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) {
			return false, classed(ClassFolder, errors.New("the Sent folder cannot be selected"))
		}
		return false, classed(ClassConnection, err)
	}
	found, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: id}}}, nil).Wait()
	if err != nil {
		return false, classed(ClassProtocol, fmt.Errorf("search: %w", err))
	}
	// Walked, not expanded: "1:4294967295" is a yes, "0" a refusal.
	there, err := anyUID(found.All)
	if err != nil {
		return false, classed(ClassLimit, err)
	}
	return there, nil
}

func sentTime(s *core.Send) time.Time {
	if s.SentAt != nil {
		return *s.SentAt
	}
	return s.CreatedAt
}
