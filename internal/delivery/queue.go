package delivery

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// DeliverArgs is the job that makes one delivery attempt of a send.
type DeliverArgs struct {
	SendID string `json:"send_id"`
}

// Kind implements river.JobArgs.
func (DeliverArgs) Kind() string { return "sendonce.deliver" }

// RescueArgs is the periodic job that turns expired attempts into unknown.
type RescueArgs struct{}

// Kind implements river.JobArgs.
func (RescueArgs) Kind() string { return "sendonce.rescue" }

// PurgeArgs is the periodic job that drops idempotency keys past their TTL
// and finished sends past the retention.
type PurgeArgs struct{}

// Kind implements river.JobArgs.
func (PurgeArgs) Kind() string { return "sendonce.purge" }

type deliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	d *Deliverer
}

func (w *deliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	err := w.d.Attempt(ctx, job.Args.SendID, job.Attempt, job.MaxAttempts)
	if err != nil && !errors.Is(err, ErrRetry) {
		w.d.logger.ErrorContext(ctx, "delivery attempt", slog.String("send_id", job.Args.SendID), slog.Any("error", err))
	}
	return err
}

func (w *deliverWorker) NextRetry(job *river.Job[DeliverArgs]) time.Time {
	// River schedules on the wall clock, whatever clock the deliverer was
	// given.
	return time.Now().Add(Backoff(w.d.cfg.RetryBase, w.d.cfg.MaxRetryDelay, job.Attempt))
}

// Timeout bounds one attempt by its lease: a healthy worker finishes (or
// gives up) before the rescuer would call its send unknown.
func (w *deliverWorker) Timeout(*river.Job[DeliverArgs]) time.Duration { return w.d.cfg.AttemptLease }

type rescueWorker struct {
	river.WorkerDefaults[RescueArgs]
	d *Deliverer
}

func (w *rescueWorker) Work(ctx context.Context, _ *river.Job[RescueArgs]) error {
	n, err := w.d.RescueExpired(ctx)
	if n > 0 {
		w.d.logger.WarnContext(ctx, "attempts past their lease marked unknown", slog.Int("count", n))
	}
	return err
}

type purgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	d *Deliverer
}

func (w *purgeWorker) Work(ctx context.Context, _ *river.Job[PurgeArgs]) error {
	now := w.d.cfg.Now()
	keys, err := w.d.store.PurgeIdempotency(ctx, now)
	if err != nil {
		return err
	}
	sends, err := w.d.store.PurgeSends(ctx, now.Add(-w.d.cfg.Retention))
	if keys > 0 || sends > 0 {
		w.d.logger.InfoContext(ctx, "purged", slog.Int("idempotency_keys", keys), slog.Int("sends", sends))
	}
	return err
}

// QueueConfig configures the River client.
type QueueConfig struct {
	// Work says whether this process runs delivery workers (role worker or
	// all). An API-only process only inserts jobs.
	Work bool
	// Workers is how many attempts run at once. Defaults to 100: an attempt
	// mostly waits (for a commit, for the relay), and each relay bounds its
	// own sessions (max_sessions).
	Workers int
	// PollInterval is how often idle workers look for jobs. Defaults to
	// 200ms (SQLite has no LISTEN/NOTIFY; this bounds the pickup delay).
	PollInterval time.Duration
	// PurgeInterval is how often expired idempotency keys are purged.
	// Defaults to 1 minute.
	PurgeInterval time.Duration
}

// Queue is the River client, on either database.
type Queue struct {
	d      *Deliverer
	work   bool
	insert func(ctx context.Context, tx any, sendIDs []string) error
	start  func(ctx context.Context) error
	stop   func(ctx context.Context) error
}

// MigrateSQLite applies River's own schema to the SQLite database.
func MigrateSQLite(ctx context.Context, db *sql.DB) error {
	m, err := rivermigrate.New(riversqlite.New(db), nil)
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

// MigratePostgres applies River's own schema to the PostgreSQL database.
// The caller serialises concurrent starts (the store's advisory lock).
func MigratePostgres(ctx context.Context, pool *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

func (qc *QueueConfig) setDefaults() {
	if qc.Workers <= 0 {
		qc.Workers = 100
	}
	if qc.PollInterval <= 0 {
		qc.PollInterval = 200 * time.Millisecond
	}
	if qc.PurgeInterval <= 0 {
		qc.PurgeInterval = time.Minute
	}
}

// riverConfig is the River configuration both databases share.
func riverConfig(d *Deliverer, qc QueueConfig, logger *slog.Logger) *river.Config {
	rc := &river.Config{
		// River reports its routine at info; only its warnings matter here.
		Logger:      slog.New(warnOnly{logger.Handler()}).With(slog.String("component", "river")),
		MaxAttempts: d.cfg.MaxAttempts,
		// A job still "running" this long after its timeout belongs to a
		// dead process. Re-running it is safe: an attempt that finds its
		// send in sending declares it unknown instead of sending again,
		// and a send still queued (its process died before the attempt
		// began) is attempted. River checks every 30 s.
		RescueStuckJobsAfter: d.cfg.AttemptLease + 5*time.Second,
		JobTimeout:           d.cfg.AttemptLease,
	}
	if !qc.Work {
		return rc
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &deliverWorker{d: d})
	river.AddWorker(workers, &rescueWorker{d: d})
	river.AddWorker(workers, &purgeWorker{d: d})
	rc.Workers = workers
	rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: qc.Workers}}
	rc.FetchPollInterval = qc.PollInterval
	// Under load the workers fetch again this soon after a fetch: with 100
	// workers and 50 ms, fetching capped delivery near 2,000 messages/s.
	rc.FetchCooldown = min(qc.PollInterval, 10*time.Millisecond)
	// Periodic jobs run on the elected leader only: once per cluster.
	rc.PeriodicJobs = []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(max(d.cfg.AttemptLease/3, time.Second)),
			func() (river.JobArgs, *river.InsertOpts) { return RescueArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true, ID: "rescue"}),
		river.NewPeriodicJob(river.PeriodicInterval(qc.PurgeInterval),
			func() (river.JobArgs, *river.InsertOpts) { return PurgeArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true, ID: "purge"}),
	}
	return rc
}

// NewSQLiteQueue builds the River client on the store's single write
// connection.
func NewSQLiteQueue(db *sql.DB, d *Deliverer, qc QueueConfig, logger *slog.Logger) (*Queue, error) {
	qc.setDefaults()
	client, err := river.NewClient(riversqlite.New(db), riverConfig(d, qc, logger))
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	opts := &river.InsertOpts{MaxAttempts: d.cfg.MaxAttempts}
	return &Queue{d: d, work: qc.Work, start: client.Start, stop: client.Stop,
		insert: func(ctx context.Context, tx any, sendIDs []string) error {
			sqlTx, ok := tx.(*sql.Tx)
			if !ok {
				return fmt.Errorf("enqueue: want *sql.Tx, got %T", tx)
			}
			_, err := client.InsertManyFastTx(ctx, sqlTx, insertParams(sendIDs, opts))
			return err
		}}, nil
}

// NewPostgresQueue builds the River client on a pgx pool; River uses
// LISTEN/NOTIFY there, so jobs are picked up without waiting for a poll.
func NewPostgresQueue(pool *pgxpool.Pool, d *Deliverer, qc QueueConfig, logger *slog.Logger) (*Queue, error) {
	qc.setDefaults()
	client, err := river.NewClient(riverpgxv5.New(pool), riverConfig(d, qc, logger))
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	opts := &river.InsertOpts{MaxAttempts: d.cfg.MaxAttempts}
	return &Queue{d: d, work: qc.Work, start: client.Start, stop: client.Stop,
		insert: func(ctx context.Context, tx any, sendIDs []string) error {
			pgTx, ok := tx.(pgx.Tx)
			if !ok {
				return fmt.Errorf("enqueue: want pgx.Tx, got %T", tx)
			}
			_, err := client.InsertManyFastTx(ctx, pgTx, insertParams(sendIDs, opts))
			return err
		}}, nil
}

// Enqueue inserts the sends' delivery jobs in tx (a *sql.Tx on SQLite, a
// pgx.Tx on PostgreSQL).
func (q *Queue) Enqueue(ctx context.Context, tx any, sendIDs []string) error {
	return q.insert(ctx, tx, sendIDs)
}

func insertParams(sendIDs []string, opts *river.InsertOpts) []river.InsertManyParams {
	ps := make([]river.InsertManyParams, len(sendIDs))
	for i, id := range sendIDs {
		ps[i] = river.InsertManyParams{Args: DeliverArgs{SendID: id}, InsertOpts: opts}
	}
	return ps
}

// Start starts the workers (when this process runs any).
func (q *Queue) Start(ctx context.Context) error {
	if !q.work {
		return nil
	}
	if err := q.start(ctx); err != nil {
		return fmt.Errorf("start queue: %w", err)
	}
	return nil
}

// Stop stops taking jobs and waits for running attempts to finish.
func (q *Queue) Stop(ctx context.Context) error {
	if !q.work {
		return nil
	}
	return q.stop(ctx)
}

// warnOnly drops records below warning.
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{w.Handler.WithAttrs(as)} }
func (w warnOnly) WithGroup(g string) slog.Handler       { return warnOnly{w.Handler.WithGroup(g)} }
