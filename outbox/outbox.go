package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/idempotency"
)

// State is where a task stands.
type State string

// The states of a task.
const (
	// Pending: waiting for NextAttemptAt.
	Pending State = "pending"
	// Sending: a worker holds the task until LeaseUntil.
	Sending State = "sending"
	// Sent: sendonce accepted the send (SendID, SendStatus); it owns
	// delivery from here.
	Sent State = "sent"
	// Rejected: the server's final answer was a 4xx other than 409
	// idempotency_key_in_use and 429 (LastErrorCode, LastError). Never
	// retried; a person must look. idempotency_key_reused means the key
	// was used with other content.
	Rejected State = "rejected"
	// NeedsReconciliation: attempts or age ran out while the outcome stayed
	// unknown. Call Reconcile (it looks the key up first), or let a person
	// decide.
	NeedsReconciliation State = "needs_reconciliation"
)

// Task is an email to enqueue.
type Task struct {
	// Email is frozen at Enqueue: its JSON is stored and sent byte for
	// byte on every attempt.
	Email client.SendRequest
	// IdempotencyKey is optional: a key derived from the business event
	// ("welcome-user-42") makes Enqueue itself idempotent. Empty: a UUID v4
	// made at Enqueue.
	IdempotencyKey string
	// NotBefore delays the first attempt; zero sends as soon as a worker
	// is free.
	NotBefore time.Time
}

// Record is a stored task.
type Record struct {
	ID             string
	IdempotencyKey string
	State          State
	// Payload is the frozen body of POST /v1/send.
	Payload json.RawMessage
	// Attempts counts claims by a worker, interrupted ones included.
	Attempts int
	// LastError is the last attempt's error, kept after a later success;
	// LastErrorCode is the API's code when the server answered one.
	LastError     string
	LastErrorCode string
	// SendID and SendStatus are the send sendonce made (state sent).
	SendID     string
	SendStatus client.Status
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// NextAttemptAt is when a pending task is due.
	NextAttemptAt time.Time
	// FirstAttemptAt is zero until the first claim.
	FirstAttemptAt time.Time
	// Deadline is the bound on the task's age: no attempt starts after it.
	Deadline time.Time
	// LeaseUntil and LeaseOwner are set while a worker holds the task.
	LeaseUntil time.Time
	LeaseOwner string
	// PrevState is the state before the last transition.
	PrevState State
}

// Email decodes the frozen payload.
func (r *Record) Email() (client.SendRequest, error) {
	var e client.SendRequest
	err := json.Unmarshal(r.Payload, &e)
	return e, err
}

// Transition is reported to Config.OnTransition after a state change has
// committed.
type Transition struct {
	Task     Record // after the change
	From, To State
	// Err is the error that caused the change (nil for sending and sent).
	Err error
	// LookedUp is true when the outcome came from looking the key up
	// (GET /v1/sends?idempotency_key=) rather than from a POST.
	LookedUp bool
}

// Config configures an Outbox. Dialect is required; Client is required for
// Run, ProcessNext and Reconcile (not for Enqueue). Every other field says
// its default.
type Config struct {
	// Dialect is SQLite or Postgres. Required.
	Dialect Dialect
	// Table is the task table's name. Defaults to "sendonce_outbox".
	Table string
	// Client sends. Its own retries (with the task's key) happen inside
	// one attempt of the outbox. Its API key needs the send scope and the
	// read scope: look-ups by key (Reconcile, late retries) are reads.
	Client *client.Client
	// Workers is how many tasks Run works on at once. Defaults to 4.
	Workers int
	// PollInterval is how often an idle worker looks for due tasks.
	// Defaults to 1 second (jittered by up to a fifth).
	PollInterval time.Duration
	// Lease is how long a worker holds a task it claimed. Its call to the
	// server is cut off at four fifths of the lease, so two workers never
	// work one task at once; a task whose worker died is taken over when
	// the lease runs out. Defaults to 5 minutes.
	Lease time.Duration
	// MaxAttempts bounds the attempts (claims) of a task; then it needs
	// reconciliation. Defaults to 10.
	MaxAttempts int
	// MaxAge bounds a task's age: no attempt starts later than this after
	// Enqueue (or after Reconcile re-queued it). Defaults to 24 hours.
	MaxAge time.Duration
	// RetryBase and RetryMax space the attempts of a task: attempt n+1
	// waits a random time between half and all of
	// min(RetryMax, RetryBase·2^(n−1)), or the server's Retry-After if
	// longer. Default 2 seconds and 10 minutes.
	RetryBase time.Duration
	RetryMax  time.Duration
	// KeyTTL is the server's --idempotency-ttl (how long it replays a
	// key). A retry later than KeyTTL/2 after a task's first attempt looks
	// the key up before it posts, since the server may no longer replay
	// it. Defaults to 24 hours, the server's default.
	KeyTTL time.Duration
	// OnTransition, if set, is called after every committed state change
	// made by a worker or Reconcile (not by Enqueue, whose transaction
	// belongs to the caller), from the goroutine that made it. It must be
	// safe for concurrent use, and calls about one task from different
	// workers may arrive out of order (Task.Attempts and Task.UpdatedAt
	// order them).
	OnTransition func(Transition)
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Now reads the clock. Defaults to time.Now.
	Now func() time.Time
	// WorkerID names this process in lease_owner. Defaults to
	// host-pid-random.
	WorkerID string
}

func (c *Config) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.Lease <= 0 {
		c.Lease = 5 * time.Minute
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 10
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 24 * time.Hour
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 2 * time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 10 * time.Minute
	}
	if c.RetryMax < c.RetryBase {
		c.RetryMax = c.RetryBase
	}
	if c.KeyTTL <= 0 {
		c.KeyTTL = idempotency.DefaultTTL // the server's default
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(3))
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail on supported platforms
	return hex.EncodeToString(b)
}

// Outbox is a task table and its workers. It is safe for concurrent use;
// any number of Outboxes, in any number of processes, may share one table.
type Outbox struct {
	db  *sql.DB
	cfg Config
}

// New returns an Outbox on db. It does not touch the database; call Migrate
// first.
func New(db *sql.DB, cfg Config) (*Outbox, error) {
	if db == nil {
		return nil, errors.New("outbox: nil *sql.DB")
	}
	if err := checkDialect(cfg.Dialect); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if err := checkTable(cfg.Table); err != nil {
		return nil, err
	}
	return &Outbox{db: db, cfg: cfg}, nil
}

// Migrate creates this Outbox's table if it does not exist.
func (o *Outbox) Migrate(ctx context.Context) error {
	return MigrateTable(ctx, o.db, o.cfg.Dialect, o.cfg.Table)
}

func (o *Outbox) q(query string) string { return sqlFor(o.cfg.Dialect, o.cfg.Table, query) }

// ErrKeyReused is returned by Enqueue when the task's IdempotencyKey is
// already in the table with another email.
var ErrKeyReused = errors.New("outbox: idempotency key already enqueued with other content")

// ErrNotFound is returned for an unknown task id.
var ErrNotFound = errors.New("outbox: no such task")

// Enqueue adds a task in the caller's transaction tx: commit it with the
// business change it belongs to. It freezes the email's JSON and the key
// (task.IdempotencyKey, or a UUID v4 made now) and sends nothing.
//
// Enqueueing a key that is already in the table returns the existing task
// when the email is the same (Enqueue is idempotent), and ErrKeyReused when
// it differs; either way the caller's transaction stays usable.
func (o *Outbox) Enqueue(ctx context.Context, tx *sql.Tx, task Task) (*Record, error) {
	if tx == nil {
		return nil, errors.New("outbox: Enqueue needs the caller's *sql.Tx")
	}
	if len(task.Email.To) == 0 {
		return nil, errors.New("outbox: the email has no recipient (To)")
	}
	key := task.IdempotencyKey
	if key == "" {
		key = client.NewIdempotencyKey()
	} else if err := client.ValidateIdempotencyKey(key); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	payload, err := json.Marshal(task.Email)
	if err != nil {
		return nil, fmt.Errorf("outbox: freeze email: %w", err)
	}
	now := o.cfg.Now()
	next := now
	if task.NotBefore.After(now) {
		next = task.NotBefore
	}
	id := "obx_" + uuid.NewString()
	res, err := tx.ExecContext(ctx, o.q(qInsert), id, key, string(payload), micros(now), micros(now), micros(next), micros(next.Add(o.cfg.MaxAge)))
	if err != nil {
		return nil, fmt.Errorf("outbox: enqueue: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("outbox: enqueue: %w", err)
	}
	rec, err := scanRecord(tx.QueryRowContext(ctx, o.q(qByKey), key))
	if err != nil {
		return nil, fmt.Errorf("outbox: enqueue: read back: %w", err)
	}
	if n == 0 && string(rec.Payload) != string(payload) {
		return nil, fmt.Errorf("%w (key %s, task %s)", ErrKeyReused, key, rec.ID)
	}
	return rec, nil
}

// Get returns a task.
func (o *Outbox) Get(ctx context.Context, id string) (*Record, error) {
	return o.getBy(ctx, qByID, id, id)
}

// GetByKey returns the task with the idempotency key.
func (o *Outbox) GetByKey(ctx context.Context, key string) (*Record, error) {
	return o.getBy(ctx, qByKey, key, "key "+key)
}

// getBy reads the one task query finds by arg; name says which task in
// the errors (ErrNotFound when there is none).
func (o *Outbox) getBy(ctx context.Context, query, arg, name string) (*Record, error) {
	rec, err := scanRecord(o.db.QueryRowContext(ctx, o.q(query), arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: get %s: %w", name, err)
	}
	return rec, nil
}

// List returns up to limit tasks in a state, oldest first.
func (o *Outbox) List(ctx context.Context, state State, limit int) ([]*Record, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := o.db.QueryContext(ctx, o.q(qList), string(state), limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	defer rows.Close()
	var out []*Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("outbox: list: %w", err)
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

// Counts returns the number of tasks in each state (a gauge for metrics).
func (o *Outbox) Counts(ctx context.Context) (map[State]int, error) {
	rows, err := o.db.QueryContext(ctx, o.q(qCounts))
	if err != nil {
		return nil, fmt.Errorf("outbox: counts: %w", err)
	}
	defer rows.Close()
	out := map[State]int{}
	for rows.Next() {
		var (
			s string
			n int
		)
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("outbox: counts: %w", err)
		}
		out[State(s)] = n
	}
	return out, rows.Err()
}

// ErrNotReconcilable is returned by Reconcile for a task that is not in
// state needs_reconciliation.
var ErrNotReconcilable = errors.New("outbox: task does not need reconciliation")

// Reconcile settles a task in needs_reconciliation. It looks the key up on
// the server before anything else: if a send carries it, the task is sent
// (with that send's id); if none does, no request with the key was ever
// accepted, and the task goes back to pending with the SAME key and
// payload, its attempts reset and a fresh MaxAge. It never makes a new key.
// When the look-up fails, the task is left as it was.
func (o *Outbox) Reconcile(ctx context.Context, id string) (*Record, error) {
	if o.cfg.Client == nil {
		return nil, errors.New("outbox: Reconcile needs Config.Client")
	}
	rec, err := o.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.State != NeedsReconciliation {
		return nil, fmt.Errorf("%w: %s is %s", ErrNotReconcilable, id, rec.State)
	}
	s, found, err := o.cfg.Client.SendByKey(ctx, rec.IdempotencyKey)
	if err != nil {
		return nil, fmt.Errorf("outbox: reconcile %s: look up key: %w", id, err)
	}
	now := o.cfg.Now()
	var row *sql.Row
	if found {
		row = o.db.QueryRowContext(ctx, o.q(qReconcileSent), s.ID, string(s.Status), micros(now), id)
	} else {
		row = o.db.QueryRowContext(ctx, o.q(qReconcileRetry), micros(now), micros(now.Add(o.cfg.MaxAge)), micros(now), id)
	}
	after, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s changed meanwhile", ErrNotReconcilable, id)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: reconcile %s: %w", id, err)
	}
	o.cfg.Logger.InfoContext(ctx, "outbox task reconciled", slog.String("task", id), slog.String("state", string(after.State)), slog.Bool("found", found))
	o.emit(Transition{Task: *after, From: NeedsReconciliation, To: after.State, LookedUp: true})
	return after, nil
}

func (o *Outbox) emit(t Transition) {
	if o.cfg.OnTransition != nil {
		o.cfg.OnTransition(t)
	}
}

type scanner interface{ Scan(dest ...any) error }

func scanRecord(s scanner) (*Record, error) {
	var (
		r                                                        Record
		payload, state, sendStatus, prev                         string
		created, updated, next, first, deadline, leaseUntil, att int64
	)
	if err := s.Scan(&r.ID, &r.IdempotencyKey, &payload, &state, &att, &r.LastError, &r.LastErrorCode, &r.SendID, &sendStatus,
		&created, &updated, &next, &first, &deadline, &leaseUntil, &r.LeaseOwner, &prev); err != nil {
		return nil, err
	}
	r.Payload = json.RawMessage(payload)
	r.State, r.SendStatus, r.PrevState, r.Attempts = State(state), client.Status(sendStatus), State(prev), int(att)
	r.CreatedAt, r.UpdatedAt, r.NextAttemptAt = fromMicros(created), fromMicros(updated), fromMicros(next)
	r.FirstAttemptAt, r.Deadline, r.LeaseUntil = fromMicros(first), fromMicros(deadline), fromMicros(leaseUntil)
	return &r, nil
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMicro(n).UTC()
}
