package delivery

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
)

// RescueArgs is the periodic job that turns expired attempts into unknown.
type RescueArgs struct{}

// Kind implements river.JobArgs.
func (RescueArgs) Kind() string { return "sendonce.rescue" }

// PurgeArgs is the periodic job that drops idempotency keys past their TTL
// and finished sends past the retention.
type PurgeArgs struct{}

// Kind implements river.JobArgs.
func (PurgeArgs) Kind() string { return "sendonce.purge" }

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
	if err != nil {
		return err
	}
	audit, err := w.d.store.PurgeAudit(ctx, now.Add(-w.d.cfg.AuditRetention))
	if err != nil {
		return err
	}
	reports, err := w.d.store.PurgeDMARCReports(ctx, now.Add(-core.DMARCReportRetention))
	if keys > 0 || sends > 0 || audit > 0 || reports > 0 {
		w.d.logger.InfoContext(ctx, "purged", slog.Int("idempotency_keys", keys), slog.Int("sends", sends),
			slog.Int("audit_entries", audit), slog.Int("dmarc_reports", reports))
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
	// PollInterval is how often an idle scheduler looks for due sends.
	// Defaults to 200ms. Sends accepted in this process wake it at once;
	// this bounds the pickup of retries and of sends accepted elsewhere.
	PollInterval time.Duration
	// PurgeInterval is how often expired idempotency keys are purged.
	// Defaults to 1 minute.
	PurgeInterval time.Duration
}

// Queue runs delivery in this process: the Scheduler, which claims due
// sends from the send rows themselves, and River for the periodic
// housekeeping (rescue, purge), which its leader election runs once per
// cluster.
type Queue struct {
	d     *Deliverer
	work  bool
	sched *Scheduler
	start func(ctx context.Context) error
	stop  func(ctx context.Context) error
}

// housekeepingPoll is how often River looks for housekeeping jobs: they
// are periodic, not latency-bound, and each look is a write on SQLite.
const housekeepingPoll = time.Second

// MigrateSQLite applies River's own schema to the SQLite database.
func MigrateSQLite(ctx context.Context, db *sql.DB) error {
	m, err := rivermigrate.New(riversqlite.New(db), nil)
	return migrateUp(ctx, m, err)
}

// MigratePostgres applies River's own schema to the PostgreSQL database.
// The caller serialises concurrent starts (the store's advisory lock).
func MigratePostgres(ctx context.Context, pool *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	return migrateUp(ctx, m, err)
}

// migrateUp runs m, the migrator of either database, up to River's
// current schema; err is rivermigrate.New's, which made m. The two
// databases differ only in the driver the migrator was made with.
func migrateUp[TTx any](ctx context.Context, m *rivermigrate.Migrator[TTx], err error) error {
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

// Defaults of QueueConfig's zero fields (and of --workers and
// --poll-interval).
const (
	DefaultWorkers      = 100
	DefaultPollInterval = 200 * time.Millisecond
)

func (qc *QueueConfig) setDefaults() {
	defaults.Set(&qc.Workers, DefaultWorkers)
	defaults.Set(&qc.PollInterval, DefaultPollInterval)
	defaults.Set(&qc.PurgeInterval, time.Minute)
}

// riverConfig is the River configuration both databases share.
func riverConfig(d *Deliverer, qc QueueConfig, logger *slog.Logger) *river.Config {
	rc := &river.Config{
		// River reports its routine at info; only its warnings matter here.
		Logger:      slog.New(warnOnly{logger.Handler()}).With(slog.String("component", "river")),
		MaxAttempts: d.cfg.MaxAttempts,
	}
	if !qc.Work {
		return rc
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &rescueWorker{d: d})
	river.AddWorker(workers, &purgeWorker{d: d})
	rc.Workers = workers
	rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}}
	rc.FetchPollInterval = housekeepingPoll
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

// staleDeliverKind is the River job kind that carried deliveries before the
// send rows did; such jobs left in a database are dropped at start (their
// sends are queued rows, claimed like any other).
const staleDeliverKind = "sendonce.deliver"

// NewSQLiteQueue builds delivery on the store's single write connection.
func NewSQLiteQueue(ctx context.Context, db *sql.DB, d *Deliverer, qc QueueConfig, logger *slog.Logger) (*Queue, error) {
	qc.setDefaults()
	if _, err := db.ExecContext(ctx, `DELETE FROM river_job WHERE kind = ?`, staleDeliverKind); err != nil {
		return nil, fmt.Errorf("drop stale delivery jobs: %w", err)
	}
	client, err := river.NewClient(riversqlite.New(db), riverConfig(d, qc, logger))
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return newQueue(d, qc, client.Start, client.Stop, logger), nil
}

// NewPostgresQueue builds delivery on a pgx pool.
func NewPostgresQueue(ctx context.Context, pool *pgxpool.Pool, d *Deliverer, qc QueueConfig, logger *slog.Logger) (*Queue, error) {
	qc.setDefaults()
	if _, err := pool.Exec(ctx, `DELETE FROM river_job WHERE kind = $1`, staleDeliverKind); err != nil {
		return nil, fmt.Errorf("drop stale delivery jobs: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), riverConfig(d, qc, logger))
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return newQueue(d, qc, client.Start, client.Stop, logger), nil
}

func newQueue(d *Deliverer, qc QueueConfig, start, stop func(context.Context) error, logger *slog.Logger) *Queue {
	return &Queue{d: d, work: qc.Work, start: start, stop: stop,
		sched: NewScheduler(d, qc.Workers, qc.PollInterval, logger)}
}

// Notify tells this process's scheduler that a send became due.
func (q *Queue) Notify() { q.sched.Notify() }

// Start starts the workers (when this process runs any).
func (q *Queue) Start(ctx context.Context) error {
	if !q.work {
		return nil
	}
	if err := q.start(ctx); err != nil {
		return fmt.Errorf("start housekeeping: %w", err)
	}
	q.sched.Start()
	return nil
}

// Stop stops taking jobs and waits for running attempts to finish.
func (q *Queue) Stop(ctx context.Context) error {
	if !q.work {
		return nil
	}
	return errors.Join(q.sched.Stop(ctx), q.stop(ctx))
}

// warnOnly drops records below warning.
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{w.Handler.WithAttrs(as)} }
func (w warnOnly) WithGroup(g string) slog.Handler       { return warnOnly{w.Handler.WithGroup(g)} }
