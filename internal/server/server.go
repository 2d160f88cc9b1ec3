// Package server wires sendonce together: database, queue, delivery and
// HTTP API. The serve command and the tests build the same thing with it.
package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/redis/go-redis/v9"
	"github.com/sendonce/sendonce/idempotency"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/delivery"
	"github.com/sendonce/sendonce/internal/httpapi"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/outbound"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/transport"
)

// Config is what a sendonce instance needs. Zero values take the defaults of
// the API contract.
type Config struct {
	// DB is "sqlite:PATH" or "postgres://…". Required.
	DB string
	// DBMaxConns bounds the PostgreSQL pool. Defaults to 20.
	DBMaxConns int
	// Retention is how long finished sends are kept. Defaults to 30 days.
	Retention time.Duration
	// AuditRetention is how long audit entries are kept. Defaults to 90
	// days.
	AuditRetention time.Duration
	// Redis ("redis://…") puts a replay cache and in-flight lock in front
	// of the database's idempotency records. Optional; off by default.
	Redis string
	// RedisPrefix prefixes every Redis key. Defaults to "sendonce:idem:".
	RedisPrefix string
	// ReplayCache bounds the in-process cache of completed idempotency
	// keys that answers replays without a database read: 0 means
	// idempotency.DefaultReplayCacheEntries, negative turns it off.
	ReplayCache int
	// Transport is "capture", "mx" or an smtp:// URL. Defaults to "capture".
	Transport string
	// SecretKey seals stored DKIM keys (SENDONCE_SECRET_KEY): empty, or at
	// least 32 bytes.
	SecretKey string
	// DNSResolver ("host:port") is queried by the mx transport and domain
	// checks. Defaults to the first nameserver of /etc/resolv.conf.
	DNSResolver string
	// OutboundAllow is --outbound-allow: the address ranges, besides
	// global unicast, that connections made on a tenant's behalf (mailbox
	// relays, mx exchangers) may reach, as outbound.Parse reads them.
	OutboundAllow string
	// MXPort is for tests of the mx transport: the exchangers' SMTP port
	// (default 25). Not a user setting.
	MXPort string
	// From is the default mailbox's address. Defaults to "sendonce@localhost".
	From string
	// IdempotencyTTL defaults to idempotency.DefaultTTL.
	IdempotencyTTL time.Duration
	// ReservationLease is how long a running first request holds its key
	// in the front store (Redis) before another process may take it over.
	// Its own setting, not the delivery attempt's lease: the two bound
	// different things. Defaults to idempotency.DefaultLease.
	ReservationLease time.Duration
	// RequireIdempotencyKey: whether POST /v1/send needs a key.
	RequireIdempotencyKey bool
	// RetryBase defaults to 5s; MaxAttempts to 8; AttemptLease to 30s.
	RetryBase    time.Duration
	MaxAttempts  int
	AttemptLease time.Duration
	// Work runs delivery workers in this process (roles worker and all).
	Work bool
	// Workers defaults to 100; PollInterval to 200ms.
	Workers      int
	PollInterval time.Duration
	// MaxRequestBytes (--max-request-size) bounds a send route's request
	// body; MaxMessageBytes (--max-message-size) a message after MIME
	// encoding; MaxInflightBytes (--max-inflight-bytes) the large request
	// bodies worked on at once. 0 means httpapi's and app's defaults.
	MaxRequestBytes, MaxMessageBytes, MaxInflightBytes int64
	// AttachmentFetch (--attachment-fetch) lets attachments name a URL.
	AttachmentFetch bool
	// InflightWait is for tests: how long a large request waits for room
	// under MaxInflightBytes (default httpapi.DefaultInflightWait).
	InflightWait time.Duration
	// Now is the clock of the idempotency and delivery rules. Defaults to
	// time.Now. (River schedules on the wall clock.)
	Now func() time.Time
}

// Server is one wired sendonce instance.
type Server struct {
	Store   *sqlstore.Store
	Service *app.Service
	Deliver *delivery.Deliverer
	Queue   *delivery.Queue
	Metrics *metrics.Metrics
	Handler http.Handler
	started bool
	redis   *redis.Client
}

// New opens the database (creating and migrating it when needed) and wires
// everything. Start begins delivery; Close releases the database.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	store, err := OpenStoreWith(ctx, cfg.DB, cfg.DBMaxConns)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	s, err := wire(ctx, store, cfg, logger)
	if err != nil {
		store.Close()
		return nil, err
	}
	return s, nil
}

// OpenStore opens the database a --db value names, creating and migrating
// it (the queue's schema included) when needed.
func OpenStore(ctx context.Context, dsn string) (*sqlstore.Store, error) {
	return OpenStoreWith(ctx, dsn, 0)
}

// IsPostgres reports whether a --db value names PostgreSQL.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// OpenStoreWith is OpenStore with a PostgreSQL pool bound (0: default).
func OpenStoreWith(ctx context.Context, dsn string, maxConns int) (*sqlstore.Store, error) {
	if IsPostgres(dsn) {
		return sqlstore.OpenPostgres(ctx, dsn, sqlstore.PostgresOptions{
			MaxConns: int32(maxConns), AlsoMigrate: delivery.MigratePostgres,
		})
	}
	path, err := sqlstore.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	store, err := sqlstore.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := delivery.MigrateSQLite(ctx, store.W); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

func wire(ctx context.Context, store *sqlstore.Store, cfg Config, logger *slog.Logger) (*Server, error) {
	if err := app.CheckSecretKey(cfg.SecretKey); err != nil {
		return nil, err
	}
	resolver, err := app.ResolverAddr(cfg.DNSResolver)
	if err != nil {
		return nil, err
	}
	m := metrics.New(store.QueueDepth)
	if store.PG != nil {
		metrics.RegisterPool(m.Registry, "write", store.PG.Stat)
		metrics.RegisterPool(m.Registry, "read", store.PGRead.Stat)
	}
	store.ObserveGroupCommits(func(n int) { m.GroupCommitSize.Observe(float64(n)) })
	policy, err := outbound.Parse(cfg.OutboundAllow)
	if err != nil {
		return nil, fmt.Errorf("--outbound-allow: %w", err)
	}
	svc := app.New(store, app.Config{DefaultFrom: cfg.From, SecretKey: cfg.SecretKey, DNSResolver: resolver, Outbound: policy, Now: cfg.Now,
		AttachmentFetch: cfg.AttachmentFetch, MaxMessageBytes: cfg.MaxMessageBytes}, logger)
	d, err := delivery.NewDeliverer(svc, delivery.Config{
		DefaultTransport: cfg.Transport, RetryBase: cfg.RetryBase, MaxAttempts: cfg.MaxAttempts,
		AttemptLease: cfg.AttemptLease, Retention: cfg.Retention, AuditRetention: cfg.AuditRetention, Now: cfg.Now,
		MX: transport.MXConfig{Resolver: resolver, Port: cfg.MXPort},
	}, m, logger)
	if err != nil {
		return nil, err
	}
	qc := delivery.QueueConfig{Work: cfg.Work, Workers: cfg.Workers, PollInterval: cfg.PollInterval}
	var q *delivery.Queue
	if store.PG != nil {
		q, err = delivery.NewPostgresQueue(ctx, store.PG, d, qc, logger)
	} else {
		q, err = delivery.NewSQLiteQueue(ctx, store.W, d, qc, logger)
	}
	if err != nil {
		return nil, err
	}
	store.OnDue(q.Notify)
	var front idempotency.Store
	var rdb *redis.Client
	if cfg.Redis != "" {
		opts, err := redis.ParseURL(cfg.Redis)
		if err != nil {
			return nil, fmt.Errorf("--redis: %w", err)
		}
		rdb = redis.NewClient(opts)
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = rdb.Ping(pctx).Err()
		cancel()
		if err != nil {
			rdb.Close()
			return nil, fmt.Errorf("--redis: %w", err)
		}
		prefix := cfg.RedisPrefix
		if prefix == "" {
			prefix = "sendonce:idem:"
		}
		front = idempotency.NewRedisStore(rdb, prefix)
	}
	h := httpapi.NewServer(svc, m, httpapi.Config{
		Front:                 front,
		RequireIdempotencyKey: cfg.RequireIdempotencyKey, IdempotencyTTL: cfg.IdempotencyTTL, ReservationLease: cfg.ReservationLease,
		DefaultTransport: cfg.Transport, ReplayCacheEntries: cfg.ReplayCache,
		MaxRequestBytes: cfg.MaxRequestBytes, MaxInflightBytes: cfg.MaxInflightBytes, InflightWait: cfg.InflightWait,
	}, logger)
	return &Server{Store: store, Service: svc, Deliver: d, Queue: q, Metrics: m, Handler: h, redis: rdb}, nil
}

// Start starts the delivery workers (if this instance runs any).
func (s *Server) Start(ctx context.Context) error {
	if err := s.Queue.Start(ctx); err != nil {
		return err
	}
	s.started = true
	return nil
}

// Stop stops taking jobs and waits (bounded by ctx) for running attempts.
func (s *Server) Stop(ctx context.Context) error {
	if !s.started {
		return nil
	}
	s.started = false
	return s.Queue.Stop(ctx)
}

// Close stops the workers if needed and closes the database.
func (s *Server) Close(ctx context.Context) error {
	err := errors.Join(s.Stop(ctx), s.Deliver.Close(), s.Store.Close())
	if s.redis != nil {
		err = errors.Join(err, s.redis.Close())
	}
	return err
}
