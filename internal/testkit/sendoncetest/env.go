// Package sendoncetest starts a whole sendonce instance for tests: a real
// SQLite database in a temp dir, River workers, the HTTP API on a loopback
// listener, and (optionally) a recording SMTP server as its relay.
package sendoncetest

import (
	"cmp"
	"context"
	"crypto/tls"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/mxserver"
	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/testkit/redistest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// Clock is a wall clock that tests can move forward.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the wall time plus every Advance so far.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// Options adjusts the instance. Zero values take test-friendly defaults.
type Options struct {
	// Backend is the database; default SQLite.
	Backend Backend
	// Redis puts the Redis replay cache in front (SENDONCE_TEST_REDIS_URL,
	// with a prefix of this instance's own); the test is skipped, saying
	// how to enable it, when no Redis is configured.
	Redis bool
	// NoReplayCache turns the in-process replay cache off, for tests that
	// must see the database (or Redis) answer.
	NoReplayCache bool
	// DB reuses a database (restart tests): Env.DB of an earlier instance.
	DB string
	// SMTP starts a recording SMTP server and makes it the transport;
	// otherwise the capture transport is used.
	SMTP bool
	// SMTPTranscript makes that server keep its Transcript.
	SMTPTranscript bool
	// DBPath reuses a database file (restart tests); default a fresh one.
	DBPath string
	// IMAPRescan is how often connected mailboxes are listed; default
	// 200ms.
	IMAPRescan time.Duration
	// AllowNoKey turns --require-idempotency-key off.
	AllowNoKey   bool
	TTL          time.Duration // default 24h
	Lease        time.Duration // default 30s
	LeasePerMiB  time.Duration // a large send's lease growth; default delivery's
	RetryBase    time.Duration // default 20ms
	MaxAttempts  int           // default 8
	NoWorkers    bool
	PollInterval time.Duration // default 20ms
	Clock        *Clock        // default a fresh one
	// SecretKey is SENDONCE_SECRET_KEY, which seals stored DKIM keys;
	// default none (stored unencrypted).
	SecretKey string
	// DNSResolver ("host:port", a dnstest server) is queried by the mx
	// transport and the domain checks.
	DNSResolver string
	// MX makes the transport mx, with exchangers reached at the recording
	// SMTP server's port (SMTP is implied).
	MX bool
	// StrictOutbound runs with the default --outbound-allow (global
	// unicast only). Without it, loopback is allowed, where test servers
	// listen.
	StrictOutbound bool
	// RedisPrefix, with Redis, shares another instance's Redis keys
	// (Env.RedisPrefix): two processes on one Redis. Default a fresh one.
	RedisPrefix string
	// RateLimit is --rate-limit per --rate-limit-window; default off.
	RateLimit       int
	RateLimitWindow time.Duration
	// Caps are the --max-* caps; default none.
	Caps core.Caps
	// BounceDomain is --bounce-domain; Inbound also starts the inbound
	// listener on a free loopback port (Env.InboundAddr), BounceDomain
	// defaulting to "bounces.example.test".
	BounceDomain string
	Inbound      bool
	// Transport, when set, is the transport instead (an smtp:// URL of a
	// real MTA, say).
	Transport string
	// Providers is the provider transports' settings (fallbacks, intake
	// secrets, certificate hosts).
	Providers server.ProvidersConfig
	// WebhookSchedule is --webhook-retry-schedule; default "50ms,100ms".
	WebhookSchedule string
	// WebhookAllowPrivate is --webhook-allow-private.
	WebhookAllowPrivate bool
	// AttachmentFetch turns --attachment-fetch on (attachments by URL).
	AttachmentFetch bool
	// PublicURL is --public-url.
	PublicURL string
	// MaxInflightBytes and InflightWait bound the large requests in
	// progress (--max-inflight-bytes); 0: the defaults.
	MaxInflightBytes int64
	InflightWait     time.Duration
	// MaxQueueLifetime and MaxRetryDelay: --max-queue-lifetime and
	// --max-retry-delay; 0: the defaults.
	MaxQueueLifetime, MaxRetryDelay time.Duration
	// MXPort, with MX, is the exchangers' port instead of the recording
	// server's (tests that run their own exchangers).
	MXPort string
	// Shaping (--shaping file), EgressSources (--egress-source),
	// HELOName (--helo-name), TLSCA (--tls-ca) and MTASTSPort (the port
	// MTA-STS policies are fetched from) configure the mx transport.
	Shaping       string
	EgressSources []string
	HELOName      string
	TLSCA         string
	MTASTSPort    string
	// EgressPools, StreamPools and EgressWarmups are --egress-pool,
	// --stream-pool and --egress-warmup; WarmupSchedule a short warm-up
	// schedule in place of the shipped one.
	EgressPools, StreamPools, EgressWarmups []string
	WarmupSchedule                          []int
	// Workers is --workers; 0: the default.
	Workers int
	// MaxReceivedBytes is --max-received-storage; 0: the default.
	MaxReceivedBytes int64
	// MaxDMARCReports: the DMARC reports a tenant keeps; 0: the default.
	MaxDMARCReports int
	// DANE is --dane.
	DANE bool
	// InboundTLS, with Inbound, makes the listener offer STARTTLS.
	InboundTLS *tls.Config
	// InboundLimits, with Inbound, are the listener's bounds; zero
	// fields are its defaults.
	InboundLimits mxserver.Limits
	// RequireVerifiedDomain is --require-verified-domain.
	RequireVerifiedDomain bool
	// TLSReceivers is --tls-receivers (their exchangers reached at
	// MXPort); default none.
	TLSReceivers []string
	// TracerProvider takes the instance's spans; nil: none are made.
	TracerProvider trace.TracerProvider
	// Reputation is the reputation guard's thresholds (zero: the defaults).
	Reputation app.ReputationThresholds
	// DomainCheckInterval is --domain-check-interval (0: the default, 1h).
	DomainCheckInterval time.Duration
}

// Env is a running instance.
type Env struct {
	URL    string
	Server *server.Server
	SMTP   *smtptest.Server
	Clock  *Clock
	// RedisPrefix is this instance's Redis key prefix (Options.Redis).
	RedisPrefix string
	// DB is the --db value; DBPath the SQLite file (empty on PostgreSQL).
	DB     string
	DBPath string
	// AdminKey holds send, read and admin on tenant "default".
	AdminKey string
	// InboundAddr is the inbound listener's address (Options.Inbound).
	InboundAddr string

	http   *httptest.Server
	closed bool
}

// Start starts an instance; t.Cleanup stops it.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	e := &Env{Clock: o.Clock, DBPath: o.DBPath, DB: o.DB}
	if e.Clock == nil {
		e.Clock = &Clock{}
	}
	e.pickDatabase(t, o.Backend)
	cfg := e.serverConfig(t, o)
	ctx := context.Background()
	s, err := server.New(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("start sendonce: %v", err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatalf("start workers: %v", err)
	}
	e.Server = s
	e.InboundAddr = s.InboundAddr
	e.http = httptest.NewServer(s.Handler)
	e.URL = e.http.URL
	t.Cleanup(e.Close)
	_, e.AdminKey = e.NewKey(t, app.NewKeyParams{Name: "admin", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
	return e
}

// pickDatabase sets e.DB (and e.DBPath on SQLite): the one given, a fresh
// PostgreSQL database, or a SQLite file.
func (e *Env) pickDatabase(t testing.TB, b Backend) {
	t.Helper()
	switch {
	case e.DB != "":
		e.DBPath, _ = strings.CutPrefix(e.DB, "sqlite:")
		if e.DBPath == e.DB {
			e.DBPath = ""
		}
	case b == Postgres:
		e.DB = pgTemplate.NewDatabase(t)
	default:
		if e.DBPath == "" {
			e.DBPath = filepath.Join(t.TempDir(), "sendonce.db")
			copyFreshSQLite(t, e.DBPath)
		}
		e.DB = "sqlite:" + e.DBPath
	}
}

// serverConfig is the server's config for o, with the test-friendly
// defaults. It starts the recording SMTP server when o asks for one.
func (e *Env) serverConfig(t testing.TB, o Options) server.Config {
	t.Helper()
	redisURL := e.redis(t, o)
	transport, mxPort := e.transport(t, o)
	cfg := server.Config{
		DB: e.DB, Transport: transport, DBMaxConns: 8, Redis: redisURL, RedisPrefix: e.RedisPrefix, From: "sender@example.com",
		IdempotencyTTL: o.TTL, RequireIdempotencyKey: !o.AllowNoKey, RetryBase: o.RetryBase, MaxAttempts: o.MaxAttempts,
		AttemptLease: o.Lease, LeasePerMiB: o.LeasePerMiB, Work: !o.NoWorkers, PollInterval: o.PollInterval, Now: e.Clock.Now,
		SecretKey: o.SecretKey, DNSResolver: o.DNSResolver, MXPort: mxPort, BounceDomain: o.BounceDomain,
		RateLimit: o.RateLimit, RateLimitWindow: o.RateLimitWindow, Caps: o.Caps,
		WebhookRetrySchedule: o.WebhookSchedule, WebhookAllowPrivate: o.WebhookAllowPrivate, WebhookPoll: 20 * time.Millisecond,
		AttachmentFetch: o.AttachmentFetch, PublicURL: o.PublicURL, MaxInflightBytes: o.MaxInflightBytes, InflightWait: o.InflightWait,
		Providers:        o.Providers,
		IMAPRescan:       cmp.Or(o.IMAPRescan, 200*time.Millisecond),
		MaxQueueLifetime: o.MaxQueueLifetime, MaxRetryDelay: o.MaxRetryDelay, Shaping: o.Shaping, EgressSources: o.EgressSources,
		HELOName: o.HELOName, TLSCA: o.TLSCA, MTASTSPort: o.MTASTSPort, Workers: o.Workers,
		EgressPools: o.EgressPools, StreamPools: o.StreamPools, EgressWarmups: o.EgressWarmups, WarmupSchedule: o.WarmupSchedule,
		MaxReceivedBytes: o.MaxReceivedBytes, MaxDMARCReports: o.MaxDMARCReports, DANE: o.DANE, InboundTLS: o.InboundTLS,
		RequireVerifiedDomain: o.RequireVerifiedDomain, InboundLimits: o.InboundLimits, TracerProvider: o.TracerProvider,
		Reputation: o.Reputation, DomainCheckInterval: o.DomainCheckInterval, TLSReceivers: o.TLSReceivers,
	}
	if o.MXPort != "" {
		cfg.MXPort = o.MXPort
	}
	if o.Inbound {
		if cfg.BounceDomain == "" {
			cfg.BounceDomain = "bounces.example.test"
		}
		cfg.InboundAddr = "127.0.0.1:0"
	}
	if cfg.WebhookRetrySchedule == "" {
		cfg.WebhookRetrySchedule = "50ms,100ms"
	}
	if !o.StrictOutbound {
		cfg.OutboundAllow = "127.0.0.0/8,::1"
	}
	if o.NoReplayCache {
		cfg.ReplayCache = -1
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase = 20 * time.Millisecond
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	return cfg
}

// redis returns the Redis URL under o.Redis ("" without), setting
// e.RedisPrefix; with no Redis configured the test is skipped (failed
// under CI).
func (e *Env) redis(t testing.TB, o Options) string {
	t.Helper()
	if !o.Redis {
		return ""
	}
	url := redistest.URL(t)
	e.RedisPrefix = o.RedisPrefix
	if e.RedisPrefix == "" {
		e.RedisPrefix = "sendonce-test:" + app.NewID("") + ":"
	}
	return url
}

// transport returns the --transport value for o, and for mx the
// exchangers' port (the recording server's, which it starts).
func (e *Env) transport(t testing.TB, o Options) (transport, mxPort string) {
	t.Helper()
	transport = "capture"
	if o.SMTP || o.MX {
		e.SMTP = smtptest.Start(t, smtptest.Options{Transcript: o.SMTPTranscript})
		transport = "smtp://" + e.SMTP.Addr + "?tls=none"
	}
	if o.Transport != "" {
		transport = o.Transport
	}
	if o.MX {
		transport, mxPort = "mx", e.SMTP.Port
	}
	return transport, mxPort
}

// Close stops the instance (idempotent), leaving its database file.
func (e *Env) Close() {
	if e.closed {
		return
	}
	e.closed = true
	e.Server.Dashboard.Close() // its live streams would hold http.Close
	e.http.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = e.Server.Close(ctx)
}

// Exec runs raw SQL (? placeholders) on the instance's database.
func (e *Env) Exec(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	n, err := e.Server.Store.Exec(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", query, err)
	}
	return n
}

// QueryInt runs a raw SQL query (? placeholders) returning one integer.
func (e *Env) QueryInt(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.Server.Store.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("query %q: %v", query, err)
	}
	return n
}

// NewKey creates an API key and returns it with its secret.
func (e *Env) NewKey(t testing.TB, p app.NewKeyParams) (*core.APIKey, string) {
	t.Helper()
	k, secret, err := e.Server.Service.CreateKey(context.Background(), p)
	if err != nil {
		t.Fatalf("create key: %v", err)
	}
	return k, secret
}
