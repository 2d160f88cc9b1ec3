package server

import (
	"crypto/tls"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sendonce/sendonce/internal/accesslog"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/mxserver"
	"github.com/sendonce/sendonce/internal/submission"
)

// Config is what a sendonce instance needs. A zero field takes its default,
// the named constant of the package that owns the setting (the serve
// flags use the same constants); negative ReplayCache turns the cache off.
type Config struct {
	// DB is "sqlite:PATH" or "postgres://…". Required.
	DB string
	// Version is the binary's version, which /healthz names
	// (internal/buildinfo); "" says "dev".
	Version string
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
	// DKIMRetireAfter is --dkim-retire-after: how long after a DKIM key
	// rotation the former key's record is listed for removal. Defaults to
	// app.DefaultDKIMRetireAfter.
	DKIMRetireAfter time.Duration
	// DomainCheckInterval is --domain-check-interval: how often a worker
	// re-checks the domains not verified and those with a DKIM rotation
	// pending (jittered by DomainCheckJitter). Defaults to
	// DefaultDomainCheckInterval.
	DomainCheckInterval time.Duration
	// TLSReceivers is --tls-receivers: the receiver domains whose
	// exchangers the domain check's bulk sender rules connect to, to see
	// STARTTLS offered (dnscheck.ParseReceivers). Defaults to none.
	TLSReceivers []string
	// OutboundAllow is --outbound-allow: the address ranges, besides
	// global unicast, that connections made on a tenant's behalf (mailbox
	// relays, mx exchangers) may reach, as netpolicy.Parse reads them.
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
	// Reputation is the reputation guard's thresholds (--pause-complaint-rate,
	// --pause-bounce-rate, --pause-min-sends); zero fields take app's
	// defaults.
	Reputation app.ReputationThresholds
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
	// Addr is the HTTP API's listen address (--addr): without PublicURL,
	// the one-click unsubscribe links are http://{Addr}/u/….
	Addr string
	// MaxReceivedBytes (--max-received-storage) bounds a tenant's stored
	// received mail: 0 means app's default, negative no bound.
	MaxReceivedBytes int64
	// MaxDMARCReports is for tests: the DMARC reports a tenant keeps
	// before the oldest give way (default core.MaxDMARCReportsPerTenant).
	MaxDMARCReports int
	// InflightWait is for tests: how long a large request waits for room
	// under MaxInflightBytes (default kit.DefaultInflightWait).
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
	// InboundLimits bound the inbound listener's sessions
	// (--inbound-max-memory, --inbound-session-timeout); zero fields are
	// the listener's defaults.
	InboundLimits mxserver.Limits
	// Providers is the provider transports' settings: fallbacks, the
	// intake routes' secrets and certificate hosts (providers.go).
	Providers ProvidersConfig
	// AccessLog takes the HTTP API's line per request. Defaults to the
	// server's logger; the serve command writes the lines directly
	// (accesslog.Direct) in the logger's format.
	AccessLog accesslog.Logger
	// TracerProvider takes the spans of requests, acceptances, delivery
	// attempts, webhook deliveries and received messages
	// (internal/tracing.Setup makes it from OTEL_*). Defaults to none: no
	// span is made.
	TracerProvider trace.TracerProvider
}
