package server

import (
	"context"
	"log/slog"
	"sync"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/imapsync"
	"github.com/sendonce/sendonce/internal/imapurl"
	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// imapProbe is the mailbox status route's IMAP login check: through the
// outbound policy, answered as a class.
func imapProbe(policy *netpolicy.Policy) func(ctx context.Context, cfg imapurl.Config) string {
	return func(ctx context.Context, cfg imapurl.Config) string {
		err := imapsync.Probe(ctx, cfg, imapsync.DialOptions{DialContext: policy.DialContext})
		if err == nil {
			return ""
		}
		return imapsync.Describe(err)
	}
}

// imapWorkers are the connected mailboxes' syncer and Sent-folder
// appender of a worker process (docs/mailboxes.md).
type imapWorkers struct {
	syncer   *imapsync.Syncer
	appender *imapsync.Appender
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// newIMAPWorkers wires the syncer to receiving (svc.Receive) and both to
// the store, dialling through the outbound policy; nil where delivery does
// not run (role api).
func newIMAPWorkers(store *sqlstore.Store, svc *app.Service, cfg Config, policy *netpolicy.Policy, logger *slog.Logger) *imapWorkers {
	if !cfg.Work {
		return nil
	}
	dial := imapsync.DialOptions{DialContext: policy.DialContext}
	sc := imapsync.Config{Days: cfg.IMAPSyncDays, MaxMessageBytes: cfg.MaxMessageBytes, Rescan: cfg.IMAPRescan, Wake: svc.IMAPWake(), Dial: dial, Now: cfg.Now,
		OnEvent: func(ctx context.Context, e imapsync.Event) {
			logger.WarnContext(ctx, e.Type, slog.String("tenant", e.Tenant), slog.String("mailbox_id", e.MailboxID), slog.String("class", e.Class))
			if err := svc.MailboxEvent(ctx, e.Tenant, e.MailboxID, e.Type == imapsync.EventConnected, e.Class); err != nil {
				logger.ErrorContext(ctx, "queue mailbox webhook", slog.String("mailbox_id", e.MailboxID), slog.Any("error", err))
			}
		}}
	return &imapWorkers{
		syncer:   imapsync.New(svc.IMAPStore(), svc.MailboxIMAP, svc, sc, logger),
		appender: imapsync.NewAppender(svc.IMAPStore(), svc.MailboxIMAP, imapsync.AppendConfig{Dial: dial, Now: cfg.Now}, logger),
	}
}

// start runs them until stop.
func (w *imapWorkers) start() {
	if w == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Go(func() { w.syncer.Run(ctx) })
	w.appender.Start()
}

// stop ends them and waits (bounded by ctx) until they let their leases go.
func (w *imapWorkers) stop(ctx context.Context) error {
	if w == nil || w.cancel == nil {
		return nil
	}
	w.cancel()
	err := w.appender.Stop(ctx)
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
