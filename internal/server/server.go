// Package server wires sendonce together: database, queue, delivery and
// HTTP API. The serve command and the tests build the same thing with it.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
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
	"github.com/sendonce/sendonce/internal/inbound"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/outbound"
	"github.com/sendonce/sendonce/internal/ratelimit"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/submission"
	"github.com/sendonce/sendonce/internal/transport"
	"github.com/sendonce/sendonce/internal/verp"
	"github.com/sendonce/sendonce/internal/webhook"
)

// Config is what a sendonce instance needs. A zero field takes its default,
// the named constant of the package that owns the setting (the serve
// flags use the same constants); negative ReplayCache turns the cache off.
type Config struct {
	// DB is "sqlite:PATH" or "postgres://…". Required.
	DB string
	// DBMaxConns bounds the PostgreSQL pool. Defaults to
	// sqlstore.DefaultMaxConns.
	DBMaxConns int
	// Retention is how long finished sends are kept. Defaults to
	// delivery.DefaultRetention.
	Retention time.Duration
	// AuditRetention is how long audit entries are kept. Defaults to
	// delivery.DefaultAuditRetention.
	AuditRetention time.Duration
	// Redis ("redis://…") puts a replay cache and in-flight lock in front
	// of the database's idempotency records. Optional; off by default.
	Redis string
	// RedisPrefix prefixes every Redis key. Defaults to DefaultRedisPrefix.
	RedisPrefix string
	// ReplayCache bounds the in-process cache of completed idempotency
	// keys that answers replays without a database read: 0 means
	// idempotency.DefaultReplayCacheEntries, negative turns it off.
	ReplayCache int
	// Transport is "capture", "mx" or an smtp:// URL (transport.ParseSpec).
	// Defaults to transport.DefaultSpec, "capture".
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
	// MXPort is --mx-port: the exchangers' SMTP port under mx (default
	// transport.DefaultMXPort, 25; tests use another).
	MXPort string
	// HELOName is --helo-name: the name the mx transport says in EHLO
	// (default transport.DefaultHELOName); an egress source may have its
	// own.
	HELOName string
	// MaxQueueLifetime is --max-queue-lifetime (default
	// delivery.DefaultMaxQueueLifetime) and MaxRetryDelay --max-retry-delay
	// (default delivery.DefaultMaxRetryDelay).
	MaxQueueLifetime, MaxRetryDelay time.Duration
	// Shaping is --shaping: a file laid over the shipped traffic shaping
	// of the mx transport ("" for the shipped one alone).
	Shaping string
	// EgressSources are the --egress-source values (NAME=IP[,ehlo=HOST]).
	EgressSources []string
	// EgressPools, StreamPools and EgressWarmups are the --egress-pool,
	// --stream-pool and --egress-warmup values (egress.go).
	EgressPools, StreamPools, EgressWarmups []string
	// WarmupSchedule is for tests: a shorter warm-up schedule than the
	// shipped transport.WarmupSchedule. Not a user setting.
	WarmupSchedule []int
	// TLSCA is --tls-ca: a PEM file of roots trusted besides the system's
	// for exchangers' certificates and MTA-STS policy fetches.
	TLSCA string
	// RequireVerifiedDomain is --require-verified-domain.
	RequireVerifiedDomain bool
	// DANE is --dane: TLSA records the resolver validated bind mx
	// deliveries to TLS and to the certificates they name.
	DANE bool
	// MTASTSPort is for tests: the port MTA-STS policies are fetched from
	// (default 443). Not a user setting.
	MTASTSPort string
	// From is the default mailbox's address. Defaults to app.DefaultFrom.
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
	// RetryBase, MaxAttempts and AttemptLease default to delivery's
	// DefaultRetryBase, DefaultMaxAttempts and DefaultAttemptLease.
	RetryBase    time.Duration
	MaxAttempts  int
	AttemptLease time.Duration
	// LeasePerMiB is how much a large send's lease grows per MiB.
	// Defaults to delivery.DefaultLeasePerMiB (tests set it).
	LeasePerMiB time.Duration
	// Work runs delivery workers in this process (roles worker and all).
	Work bool
	// Workers and PollInterval default to delivery.DefaultWorkers and
	// delivery.DefaultPollInterval.
	Workers      int
	PollInterval time.Duration
	// RateLimit is every API key's request limit unless the key sets its
	// own: RateLimit requests per RateLimitWindow. Off when either is 0
	// (the default here and of the binary's flags, see
	// ratelimit.DefaultRequests). With Redis the count is shared by every
	// process on it; without, each process counts its own.
	RateLimit       int
	RateLimitWindow time.Duration
	// Caps bounds what one tenant may store through the API (templates,
	// mailboxes, domains, keys). nil: none (the default here; the
	// binary's --max-* flags default to core.DefaultMax*).
	Caps core.Caps
	// WebhookRetrySchedule is --webhook-retry-schedule. Defaults to
	// webhook.DefaultSchedule.
	WebhookRetrySchedule string
	// WebhookAllowPrivate is --webhook-allow-private: webhook endpoints
	// may be on loopback and private addresses.
	WebhookAllowPrivate bool
	// WebhookPoll is how often an idle webhook worker looks for due
	// deliveries. Defaults to 500ms.
	WebhookPoll time.Duration
	// MaxRequestBytes (--max-request-size) bounds a send route's request
	// body; MaxMessageBytes (--max-message-size) a message after MIME
	// encoding; MaxInflightBytes (--max-inflight-bytes) the large request
	// bodies worked on at once. 0 means httpapi's and app's defaults.
	MaxRequestBytes, MaxMessageBytes, MaxInflightBytes int64
	// AttachmentFetch (--attachment-fetch) lets attachments name a URL.
	AttachmentFetch bool
	// PublicURL (--public-url) is the URL people reach this server at,
	// behind a TLS-terminating proxy too: https makes the dashboard's
	// cookies Secure and sends Strict-Transport-Security.
	PublicURL string
	// MaxReceivedBytes (--max-received-storage) bounds a tenant's stored
	// received mail: 0 means app's default, negative no bound.
	MaxReceivedBytes int64
	// InflightWait is for tests: how long a large request waits for room
	// under MaxInflightBytes (default httpapi.DefaultInflightWait).
	InflightWait time.Duration
	// IMAPSyncDays (--imap-sync-days) is how far back a connected
	// mailbox's first sync reaches. Defaults to 30.
	IMAPSyncDays int
	// IMAPRescan is how often the connected mailboxes are listed for new
	// ones (tests shorten it). Defaults to imapsync's 30 s.
	IMAPRescan time.Duration
	// Now is the clock of the idempotency and delivery rules. Defaults to
	// time.Now. (River schedules on the wall clock.)
	Now func() time.Time
	// SMTP is the SMTP submission server's settings (its idempotency
	// settings are taken from the ones above). It listens only when the
	// caller serves it (--smtp-addr).
	SMTP submission.Config
	// BounceDomain is --bounce-domain: attempts' envelope senders become
	// VERP addresses of it. Off when empty.
	BounceDomain string
	// InboundAddr is --inbound-addr: Start serves bounce mail (with
	// BounceDomain) and mail for receiving addresses there. Off when empty.
	InboundAddr string
	// InboundRejectDMARC is --inbound-reject-dmarc: received mail that
	// fails DMARC is refused (550) instead of kept flagged.
	InboundRejectDMARC bool
	// InboundName is the name the inbound listener greets with and writes
	// in Authentication-Results. Defaults to BounceDomain, else localhost.
	InboundName string
	// InboundTLS is --inbound-tls-cert and --inbound-tls-key, loaded: the
	// inbound listener offers STARTTLS with it.
	InboundTLS *tls.Config
	// Providers is the provider transports' settings: fallbacks, the
	// intake routes' secrets and certificate hosts (providers.go).
	Providers ProvidersConfig
}

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
	if _, err := outbound.Parse(c.OutboundAllow); err != nil {
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
	started bool
	redis   *redis.Client

	// Submission is the SMTP submission server on this instance.
	Submission *submission.Server
	// Bounce makes and checks VERP addresses; nil without --bounce-domain.
	Bounce *verp.Signer
	// InboundAddr is the inbound listener's address once started.
	InboundAddr string
	inboundAddr string
	inboundCfg  inbound.Config
	inbound     *inbound.Server
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
	policy, err := outbound.Parse(cfg.OutboundAllow)
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
	svc := app.New(store, app.Config{DefaultFrom: cfg.From, SecretKey: cfg.SecretKey, DNSResolver: resolver, Outbound: policy, Caps: cfg.Caps, Now: cfg.Now,
		AttachmentFetch: cfg.AttachmentFetch, MaxMessageBytes: cfg.MaxMessageBytes, RateLimit: cfg.RateLimit, RateLimitWindow: cfg.RateLimitWindow,
		InboundName: cmp.Or(cfg.InboundName, cfg.BounceDomain), IMAPProbe: imapProbe(policy),
		MaxReceivedBytes: cfg.MaxReceivedBytes, Egress: egressChecks(mx), RequireVerifiedDomain: cfg.RequireVerifiedDomain}, logger)
	d, err := delivery.NewDeliverer(svc, store, delivery.Config{
		DefaultTransport: cfg.Transport, RetryBase: cfg.RetryBase, MaxAttempts: cfg.MaxAttempts,
		MaxRetryDelay: cfg.MaxRetryDelay, MaxQueueLifetime: cfg.MaxQueueLifetime,
		AttemptLease: cfg.AttemptLease, LeasePerMiB: cfg.LeasePerMiB, Retention: cfg.Retention, AuditRetention: cfg.AuditRetention, Now: cfg.Now,
		MX: mx, Bounce: signer,
		Fallbacks: cfg.Providers.Fallbacks, ProviderTLS: cfg.Providers.TLS,
	}, m, logger)
	if err != nil {
		return nil, err
	}
	q, err := newQueue(ctx, store, d, cfg, logger)
	if err != nil {
		return nil, err
	}
	store.OnDue(q.Notify)
	rf, err := connectRedis(ctx, cfg, svc.Now, logger)
	if err != nil {
		return nil, err
	}
	hooks, worker, err := wireWebhooks(store, cfg, policy, logger)
	if err != nil {
		return nil, err
	}
	// One idempotency engine for every door of the process.
	idem := svc.NewIdempotencyEngine(app.IdempotencyConfig{Front: rf.front, TTL: cfg.IdempotencyTTL,
		Lease: cfg.ReservationLease, ReplayCacheEntries: cfg.ReplayCache, Logger: logger})
	dash := dashboard.New(dashboard.Config{Service: svc, Webhooks: hooks, Reads: store, Sessions: store, Stats: store, Metrics: m, Logger: logger,
		Idempotency: idem, HTTPS: strings.HasPrefix(strings.ToLower(cfg.PublicURL), "https://"),
		Destinations: func() []dashboard.Destination { return dashboardDestinations(d.Destinations()) }})
	h := httpapi.NewServer(svc, m, httpapi.Config{
		Reads:                 store,
		Webhooks:              hooks,
		Idempotency:           idem,
		RequireIdempotencyKey: cfg.RequireIdempotencyKey,
		SecretKey:             cfg.SecretKey,
		DefaultTransport:      cfg.Transport,
		RateLimit:             ratelimit.Limit{Requests: cfg.RateLimit, Window: cfg.RateLimitWindow}, Limiter: rf.limiter,
		Dashboard:       dash,
		Providers:       intakeConfig(cfg, policy),
		Destinations:    func() any { return d.Destinations() },
		MaxRequestBytes: cfg.MaxRequestBytes, MaxInflightBytes: cfg.MaxInflightBytes, InflightWait: cfg.InflightWait,
	}, logger)
	sc := cfg.SMTP
	sc.Idempotency = idem
	sub := submission.New(svc, m, sc, logger)
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Server{Store: store, Service: svc, Deliver: d, Queue: q, Metrics: m, Webhooks: worker, Handler: h, Dashboard: dash, Submission: sub, redis: rf.client,
		Bounce: signer, inboundAddr: cfg.InboundAddr, inboundCfg: inboundConfig(cfg, resolver), now: now, logger: logger,
		imap: newIMAPWorkers(store, svc, cfg, policy, logger)}, nil
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

// wireWebhooks makes the webhook use cases and, where delivery runs, the
// worker. Endpoints follow --outbound-allow, plus private and loopback
// addresses under --webhook-allow-private.
func wireWebhooks(store *sqlstore.Store, cfg Config, policy *outbound.Policy, logger *slog.Logger) (*webhook.Service, *webhook.Worker, error) {
	schedule, err := webhook.ParseSchedule(cmp.Or(cfg.WebhookRetrySchedule, webhook.DefaultSchedule))
	if err != nil {
		return nil, nil, fmt.Errorf("--webhook-retry-schedule: %w", err)
	}
	if cfg.WebhookAllowPrivate {
		policy = policy.With(outbound.MustParse("private"))
	}
	svc := webhook.NewService(store, webhook.ServiceConfig{Policy: policy, SecretKey: cfg.SecretKey, Now: cfg.Now}, logger)
	if !cfg.Work {
		return svc, nil, nil
	}
	w := webhook.NewWorker(store, webhook.WorkerConfig{Schedule: schedule, Policy: policy, SecretKey: cfg.SecretKey,
		Poll: cfg.WebhookPoll, Now: cfg.Now}, logger)
	store.OnWebhookDue(w.Notify)
	return svc, w, nil
}

// Start starts the delivery workers (if this instance runs any).
func (s *Server) Start(ctx context.Context) error {
	if err := s.Queue.Start(ctx); err != nil {
		return err
	}
	if s.Webhooks != nil {
		s.Webhooks.Start()
	}
	s.started = true
	s.imap.start()
	return s.startInbound(s.logger)
}

// Stop stops taking jobs and waits (bounded by ctx) for running attempts.
func (s *Server) Stop(ctx context.Context) error {
	if !s.started {
		return nil
	}
	s.started = false
	var werr error
	if s.Webhooks != nil {
		werr = s.Webhooks.Stop(ctx)
	}
	return errors.Join(s.stopInbound(ctx), s.imap.stop(ctx), s.Queue.Stop(ctx), werr)
}

// Close stops the workers if needed and closes the database.
func (s *Server) Close(ctx context.Context) error {
	err := errors.Join(s.Stop(ctx), s.Deliver.Close(), s.Store.Close())
	if s.redis != nil {
		err = errors.Join(err, s.redis.Close())
	}
	return err
}
