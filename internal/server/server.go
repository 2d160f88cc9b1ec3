// Package server wires sendonce together: database, queue, delivery and
// HTTP API. The serve command and the tests build the same thing with it.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/idempotency/redisstore"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dashboard"
	"github.com/sendonce/sendonce/internal/delivery"
	"github.com/sendonce/sendonce/internal/httpapi"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/lifecycle"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/mxserver"
	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/ratelimit"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/submission"
	"github.com/sendonce/sendonce/internal/transport"
	"github.com/sendonce/sendonce/internal/verp"
	"github.com/sendonce/sendonce/internal/webhook"
)

// DefaultRedisPrefix prefixes sendonce's Redis keys unless
// Config.RedisPrefix says otherwise.
const DefaultRedisPrefix = "sendonce:idem:"

// validate checks the settings New cannot default.
func (c Config) validate() error {
	if c.DB == "" {
		return errors.New("no database given")
	}
	if err := app.CheckSecretKey(c.SecretKey); err != nil {
		return err
	}
	if _, err := app.ResolverAddr(c.DNSResolver); err != nil {
		return err
	}
	if _, err := netpolicy.Parse(c.OutboundAllow); err != nil {
		return fmt.Errorf("--outbound-allow: %w", err)
	}
	if c.Transport != "" {
		if _, err := transport.ParseSpec(c.Transport); err != nil {
			return err
		}
	}
	if _, err := mxConfig(c, ""); err != nil {
		return err
	}
	return nil
}

// Server is one wired sendonce instance.
type Server struct {
	Store   *sqlstore.Store
	Service *app.Service
	Deliver *delivery.Deliverer
	Queue   *delivery.Queue
	Metrics *metrics.Metrics
	Handler http.Handler
	// Ops answers /healthz, /readyz and /metrics alone (--ops-addr): what
	// probes and scrapers ask of a worker, which serves no API.
	Ops   http.Handler
	redis *redis.Client
	// life is the one list of what Start starts and Stop stops, in order:
	// the queue, the webhook and IMAP workers, the inbound listener, then
	// the listeners the caller adds (Add: HTTP, SMTP submission).
	life lifecycle.Group

	// Submission is the SMTP submission server on this instance.
	Submission *submission.Server
	// Bounce makes and checks VERP addresses; nil without --bounce-domain.
	Bounce *verp.Signer
	// InboundAddr is the inbound listener's address once started.
	InboundAddr string
	inboundAddr string
	inboundCfg  mxserver.Config
	inbound     *mxserver.Server
	now         func() time.Time
	logger      *slog.Logger
	// imap runs connected mailboxes' sync and Sent appends (workers only).
	imap *imapWorkers
	// Webhooks is the webhook worker; nil when this instance runs no
	// workers.
	Webhooks *webhook.Worker
	// Dashboard is the web dashboard inside Handler; Close it before an
	// http.Server shuts down, or its live streams hold the shutdown.
	Dashboard *dashboard.Dashboard
	// ready is GET /readyz's state: starting until Start returns, then
	// up until Drain or Stop.
	ready *readiness
	// domainChecks is the periodic domain check (workers only).
	domainChecks *domainChecker
}

// New opens the database (creating and migrating it when needed) and wires
// everything. Start begins delivery; Close releases the database.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
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

// wire builds every part of an instance on store, inner ones first: the
// use cases, delivery and its queue, the Redis front, webhooks, and the
// ways in (dashboard, HTTP API, SMTP submission).
func wire(ctx context.Context, store *sqlstore.Store, cfg Config, logger *slog.Logger) (*Server, error) {
	resolver, err := app.ResolverAddr(cfg.DNSResolver)
	if err != nil {
		return nil, err
	}
	m := storeMetrics(store)
	policy, err := netpolicy.Parse(cfg.OutboundAllow)
	if err != nil {
		return nil, fmt.Errorf("--outbound-allow: %w", err)
	}
	signer, err := bounceSigner(ctx, store, cfg.BounceDomain)
	if err != nil {
		return nil, err
	}
	mx, err := mxConfig(cfg, resolver)
	if err != nil {
		return nil, err
	}
	// Redis, when set, fronts the idempotency engine, which the service
	// builds: one engine for every door of the process.
	rf, err := connectRedis(ctx, cfg, clockOf(cfg), logger)
	if err != nil {
		return nil, err
	}
	svc := app.New(store, appConfig(cfg, resolver, policy, mx, rf, logger), logger)
	m.RegisterReputation(reputationGauges(svc), logger)
	d, err := delivery.NewDeliverer(svc, store, deliveryConfig(cfg, mx, signer), m, logger)
	if err != nil {
		return nil, err
	}
	q, err := newQueue(ctx, store, d, cfg, logger)
	if err != nil {
		return nil, err
	}
	store.OnDue(q.Notify)
	hooks, worker, err := wireWebhooks(store, cfg, policy, logger)
	if err != nil {
		return nil, err
	}
	ready := &readiness{store: store, logger: logger}
	dash := dashboard.New(dashboard.Config{Service: svc, Webhooks: hooks, Reads: store, Sessions: store, Stats: store, Metrics: m, Logger: logger,
		HTTPS: strings.HasPrefix(strings.ToLower(cfg.PublicURL), "https://"),
		Destinations: func(tenant string) []dashboard.Destination {
			return dashboardDestinations(d.TenantDestinations(tenant))
		}})
	h := httpapi.NewServer(svc, m, kit.Config{
		Version:               cmp.Or(cfg.Version, "dev"),
		Reads:                 store,
		Webhooks:              hooks,
		RequireIdempotencyKey: cfg.RequireIdempotencyKey,
		SecretKey:             cfg.SecretKey,
		DefaultTransport:      cfg.Transport,
		RateLimit:             ratelimit.Limit{Requests: cfg.RateLimit, Window: cfg.RateLimitWindow}, Limiter: rf.limiter,
		Dashboard: dash, AccessLog: cfg.AccessLog, Ready: ready.check,
		Providers:       intakeConfig(cfg, policy),
		Destinations:    func(tenant string) any { return d.TenantDestinations(tenant) },
		MaxRequestBytes: cfg.MaxRequestBytes, MaxInflightBytes: cfg.MaxInflightBytes, InflightWait: cfg.InflightWait,
		TracerProvider: cfg.TracerProvider,
	}, logger)
	ops := httpapi.NewOps(svc, m, kit.Config{Version: cmp.Or(cfg.Version, "dev"), Reads: store, Ready: ready.check}, logger)
	sc := cfg.SMTP
	sub := submission.New(svc, m, sc, logger)
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	srv := &Server{Store: store, Service: svc, Deliver: d, Queue: q, Metrics: m, Webhooks: worker, Handler: h, Ops: ops, Dashboard: dash, Submission: sub, redis: rf.client,
		Bounce: signer, inboundAddr: cfg.InboundAddr, inboundCfg: inboundConfig(cfg, resolver), now: now, logger: logger,
		imap: newIMAPWorkers(store, svc, cfg, policy, logger), ready: ready, domainChecks: newDomainChecker(svc, cfg, logger)}
	srv.services()
	return srv, nil
}

// reputationGauges reads the reputation guard's tenants for the metrics.
func reputationGauges(svc *app.Service) func(ctx context.Context) ([]metrics.TenantReputation, error) {
	return func(ctx context.Context) ([]metrics.TenantReputation, error) {
		reps, err := svc.GuardedReputations(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]metrics.TenantReputation, 0, len(reps))
		for _, r := range reps {
			out = append(out, metrics.TenantReputation{Tenant: r.Tenant, ComplaintRate: r.ComplaintRate, BounceRate: r.BounceRate,
				Paused: r.State == core.StreamPaused})
		}
		return out, nil
	}
}

// storeMetrics makes the registry, with the store's pools and group
// commits observed.
func storeMetrics(store *sqlstore.Store) *metrics.Metrics {
	m := metrics.New(store.QueueDepth)
	if store.PG != nil {
		metrics.RegisterPool(m.Registry, "write", store.PG.Stat)
		metrics.RegisterPool(m.Registry, "read", store.PGRead.Stat)
	}
	store.ObserveGroupCommits(func(n int) { m.GroupCommitSize.Observe(float64(n)) })
	return m
}

// newQueue makes the delivery queue on the store's database.
func newQueue(ctx context.Context, store *sqlstore.Store, d *delivery.Deliverer, cfg Config, logger *slog.Logger) (*delivery.Queue, error) {
	qc := delivery.QueueConfig{Work: cfg.Work, Workers: cfg.Workers, PollInterval: cfg.PollInterval}
	if store.PG != nil {
		return delivery.NewPostgresQueue(ctx, store.PG, d, qc, logger)
	}
	return delivery.NewSQLiteQueue(ctx, store.W, d, qc, logger)
}

// redisFront is what --redis adds: the idempotency store in front of the
// database and the shared rate limiter. All nil without --redis.
type redisFront struct {
	client  *redis.Client
	front   idempotency.Store
	limiter ratelimit.Limiter
}

// connectRedis connects to cfg.Redis, if set, and checks that it answers,
// so that a wrong URL fails at start and not at the first request.
func connectRedis(ctx context.Context, cfg Config, now func() time.Time, logger *slog.Logger) (redisFront, error) {
	if cfg.Redis == "" {
		return redisFront{}, nil
	}
	opts, err := redis.ParseURL(cfg.Redis)
	if err != nil {
		return redisFront{}, fmt.Errorf("--redis: %w", err)
	}
	rdb := redis.NewClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = rdb.Ping(pctx).Err()
	cancel()
	if err != nil {
		rdb.Close()
		return redisFront{}, fmt.Errorf("--redis: %w", err)
	}
	prefix := cfg.RedisPrefix
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	return redisFront{client: rdb, front: redisstore.New(rdb, prefix), limiter: ratelimit.NewRedis(rdb, prefix+"rl:", now, logger)}, nil
}

// deliveryConfig is the delivery workers' part of cfg.
func deliveryConfig(cfg Config, mx transport.MXConfig, signer *verp.Signer) delivery.Config {
	return delivery.Config{
		DefaultTransport: cfg.Transport, RetryBase: cfg.RetryBase, MaxAttempts: cfg.MaxAttempts,
		MaxRetryDelay: cfg.MaxRetryDelay, MaxQueueLifetime: cfg.MaxQueueLifetime,
		AttemptLease: cfg.AttemptLease, LeasePerMiB: cfg.LeasePerMiB, Retention: cfg.Retention, AuditRetention: cfg.AuditRetention, Now: cfg.Now,
		MX: mx, Bounce: signer,
		Fallbacks: cfg.Providers.Fallbacks, ProviderTLS: cfg.Providers.TLS, TracerProvider: cfg.TracerProvider,
	}
}

// wireWebhooks makes the webhook use cases and, where delivery runs, the
// worker. Endpoints follow --outbound-allow, plus private and loopback
// addresses under --webhook-allow-private.
// clockOf is the process's clock in UTC: cfg.Now, else time.Now.
func clockOf(cfg Config) func() time.Time {
	clock := cfg.Now
	if clock == nil {
		clock = time.Now
	}
	return func() time.Time { return clock().UTC() }
}

// appConfig is the service's configuration from the server's.
func appConfig(cfg Config, resolver string, policy *netpolicy.Policy, mx transport.MXConfig, rf redisFront, logger *slog.Logger) app.Config {
	return app.Config{DefaultFrom: cfg.From, SecretKey: cfg.SecretKey, DNSResolver: resolver, Outbound: policy, Caps: cfg.Caps, Now: cfg.Now,
		DKIMRetireAfter: cfg.DKIMRetireAfter,
		AttachmentFetch: cfg.AttachmentFetch, MaxMessageBytes: cfg.MaxMessageBytes, RateLimit: cfg.RateLimit, RateLimitWindow: cfg.RateLimitWindow,
		InboundName: cmp.Or(cfg.InboundName, cfg.BounceDomain), NoInboundListener: cfg.InboundAddr == "", IMAPProbe: imapProbe(policy),
		MaxReceivedBytes: cfg.MaxReceivedBytes, MaxDMARCReports: cfg.MaxDMARCReports, Egress: egressChecks(mx), RequireVerifiedDomain: cfg.RequireVerifiedDomain,
		TracerProvider: cfg.TracerProvider, Reputation: cfg.Reputation, SenderRules: senderRules(cfg, mx),
		PublicURL: cmp.Or(cfg.PublicURL, "http://"+cfg.Addr), UnsubscribeDomain: unsubscribeDomain(cfg),
		Idempotency: app.IdempotencyConfig{Front: rf.front, TTL: cfg.IdempotencyTTL, Lease: cfg.ReservationLease,
			ReplayCacheEntries: cfg.ReplayCache, Logger: logger}}
}

// senderRules is what the domain check's bulk sender rules need of cfg:
// the receivers are probed as the mx transport would reach them (its
// port, EHLO name and --tls-ca roots).
func senderRules(cfg Config, mx transport.MXConfig) app.SenderRulesConfig {
	return app.SenderRulesConfig{BounceDomain: cfg.BounceDomain, TLSReceivers: cfg.TLSReceivers,
		HELOName: mx.HELOName, Port: mx.Port, RootCAs: mx.RootCAs}
}

func wireWebhooks(store *sqlstore.Store, cfg Config, policy *netpolicy.Policy, logger *slog.Logger) (*webhook.Service, *webhook.Worker, error) {
	schedule, err := webhook.ParseSchedule(cmp.Or(cfg.WebhookRetrySchedule, webhook.DefaultSchedule))
	if err != nil {
		return nil, nil, fmt.Errorf("--webhook-retry-schedule: %w", err)
	}
	if cfg.WebhookAllowPrivate {
		policy = policy.With(netpolicy.MustParse("private"))
	}
	svc := webhook.NewService(store, webhook.ServiceConfig{Policy: policy, SecretKey: cfg.SecretKey, Now: cfg.Now}, logger)
	if !cfg.Work {
		return svc, nil, nil
	}
	w := webhook.NewWorker(store, webhook.WorkerConfig{Schedule: schedule, Policy: policy, SecretKey: cfg.SecretKey,
		Poll: cfg.WebhookPoll, Now: cfg.Now, TracerProvider: cfg.TracerProvider}, logger)
	store.OnWebhookDue(w.Notify)
	return svc, w, nil
}

// Add appends a part the caller runs (the HTTP API, SMTP submission) to
// the process's list: it starts after the workers and the inbound
// listener, and stops before them.
func (s *Server) Add(name string, svc lifecycle.Service) { s.life.Add(name, svc) }

// services lists the parts every instance has, in their start order.
func (s *Server) services() {
	s.life.Add("queue", s.Queue)
	if s.Webhooks != nil {
		s.life.Add("webhooks", lifecycle.Funcs{
			OnStart: func(context.Context) error { s.Webhooks.Start(); return nil },
			OnStop:  s.Webhooks.Stop,
		})
	}
	s.life.Add("imap", lifecycle.Funcs{
		OnStart: func(context.Context) error { s.imap.start(); return nil },
		OnStop:  s.imap.stop,
	})
	if s.domainChecks != nil {
		s.life.Add("domain-checks", s.domainChecks)
	}
	s.life.Add("inbound", lifecycle.Funcs{
		OnStart: func(context.Context) error { return s.startInbound(s.logger) },
		OnStop:  s.stopInbound,
	})
}

// Start starts every part of the process in order (services, then what
// the caller added). Once it returns, every listener of the process is
// up, and GET /readyz may answer 200.
func (s *Server) Start(ctx context.Context) error {
	if err := s.life.Start(ctx); err != nil {
		return err
	}
	s.ready.phase.CompareAndSwap(phaseStarting, phaseUp) // not back from draining
	return nil
}

// Stop stops every started part in the reverse order — the ways in
// first, then the workers, waiting (bounded by ctx) for running attempts.
func (s *Server) Stop(ctx context.Context) error {
	s.Drain()
	return s.life.Stop(ctx)
}

// Close stops the workers if needed and closes the database.
func (s *Server) Close(ctx context.Context) error {
	err := errors.Join(s.Stop(ctx), s.Deliver.Close(), s.Store.Close())
	if s.redis != nil {
		err = errors.Join(err, s.redis.Close())
	}
	return err
}
