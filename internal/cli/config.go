package cli

import (
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/delivery"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/mxserver"
	"github.com/sendonce/sendonce/internal/ratelimit"
	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/transport"
	"github.com/sendonce/sendonce/internal/webhook"
)

// Config is every serve setting: the server's own (server.Config, each
// field set by one flag) and what only the command uses. Each is a flag
// and an environment variable; the flag wins. Zero in a flag means off
// where a setting can be off (--replay-cache 0, --max-per-hour 0); the
// other numbers and durations must be positive (validate). server.Config
// itself reads a zero field as its default instead, for callers that
// build it in code.
type Config struct {
	Server server.Config
	Addr   string
	// OpsAddr is --ops-addr: /healthz, /readyz and /metrics alone, for
	// any role ("" : none).
	OpsAddr   string
	Role      string
	LogFormat string
	LogLevel  string
	// AccessLogSample is --access-log-sample: one in N access lines of
	// answers below 400 is written (accesslog.Sampled).
	AccessLogSample int
	// ReplayCache is --replay-cache: 0 turns the cache off (server.Config's
	// ReplayCache reads 0 as the default; see replayCacheSize).
	ReplayCache int
	// ShutdownGrace is --shutdown-grace (see Config.shutdownGrace).
	ShutdownGrace time.Duration
	// DrainDelay is --drain-delay: how long the API keeps serving after
	// SIGTERM while GET /readyz answers 503 draining, before the shutdown.
	DrainDelay time.Duration
	// MaxTemplates, MaxMailboxes, MaxDomains and MaxAPIKeys are the
	// --max-* caps per tenant (0: none), server.Config's Caps.
	MaxTemplates, MaxMailboxes, MaxDomains, MaxAPIKeys int
	MaxWebhooks, MaxSuppressions, MaxDrafts            int
	// SMTP is the --smtp-* settings of the submission server.
	SMTP smtpConfig
	// MaxRequestSize, MaxMessageSize, MaxInflightBytes and
	// AttachmentFetch: see server.Config.
	MaxRequestSize, MaxMessageSize, MaxInflightBytes int
	AttachmentFetch                                  bool
	// MaxReceivedStorage is --max-received-storage (0: no cap).
	MaxReceivedStorage int
	// InboundMaxMemory is --inbound-max-memory (server.Config's
	// InboundLimits.MaxMemory).
	InboundMaxMemory int
	// Pprof, when set, serves net/http/pprof on this separate address.
	// Off by default; it must not be reachable from outside the host.
	Pprof string
	// BounceDomain and InboundAddr are bounce intake (docs/deliverability.md).
	BounceDomain string
	InboundAddr  string
	// InboundTLSCert and InboundTLSKey make the inbound listener offer
	// STARTTLS.
	InboundTLSCert, InboundTLSKey string
	// Providers is the provider transports' flags (providers.go).
	Providers providerFlags
	// TLSReceivers is --tls-receivers, read into Server.TLSReceivers.
	TLSReceivers string
}

// envFlags defines flags whose defaults come from the environment, and
// remembers environment values that did not parse.
type envFlags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []string
}

func (e *envFlags) env(name string) (string, bool) {
	v := e.getenv(name)
	return v, v != ""
}

func (e *envFlags) str(p *string, name, env, def, usage string) {
	if v, ok := e.env(env); ok {
		def = v
	}
	e.fs.StringVar(p, name, def, usage+" (env "+env+")")
}

func (e *envFlags) dur(p *time.Duration, name, env string, def time.Duration, usage string) {
	e.fs.DurationVar(p, name, envValue(e, env, def, time.ParseDuration, "a duration"), usage+" (env "+env+")")
}

func (e *envFlags) integer(p *int, name, env string, def int, usage string) {
	e.fs.IntVar(p, name, envValue(e, env, def, strconv.Atoi, "a whole number"), usage+" (env "+env+")")
}

func (e *envFlags) float(p *float64, name, env string, def float64, usage string) {
	if v, ok := e.env(env); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			e.errs = append(e.errs, fmt.Sprintf("%s=%q: not a number", env, v))
		} else {
			def = f
		}
	}
	e.fs.Float64Var(p, name, def, usage+" (env "+env+")")
}

func (e *envFlags) boolean(p *bool, name, env string, def bool, usage string) {
	e.fs.BoolVar(p, name, envValue(e, env, def, strconv.ParseBool, "true or false"), usage+" (env "+env+")")
}

// envValue is a flag's default: the variable env parsed, or def when it
// is unset. A value that does not parse keeps def and is recorded ("not
// " + what) for err, so every bad variable is reported at once.
func envValue[T any](e *envFlags, env string, def T, parse func(string) (T, error), what string) T {
	v, ok := e.env(env)
	if !ok {
		return def
	}
	x, err := parse(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Sprintf("%s=%q: not %s", env, v, what))
		return def
	}
	return x
}

// list is a repeatable flag; the variable holds values separated by
// white space.
func (e *envFlags) list(p *[]string, name, env, usage string) {
	if v, ok := e.env(env); ok {
		*p = strings.Fields(v)
	}
	e.fs.Var(&listValue{p: p, env: len(*p) > 0}, name, usage+" (env "+env+")")
}

type listValue struct {
	p   *[]string
	env bool // still the environment's values: the first flag replaces them
}

func (l *listValue) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.Join(*l.p, " ")
}

func (l *listValue) Set(v string) error {
	if l.env {
		*l.p, l.env = nil, false
	}
	*l.p = append(*l.p, v)
	return nil
}

func (e *envFlags) err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("environment: %s", strings.Join(e.errs, "; "))
}

// DefaultDB is where the embedded database lives unless told otherwise.
const DefaultDB = "sqlite:./sendonce-data/sendonce.db"

// dbFlag is shared by every command that opens the database.
func dbFlag(e *envFlags, p *string) {
	e.str(p, "db", "SENDONCE_DB", DefaultDB, "database: sqlite:PATH (embedded) or postgres://…")
}

// DefaultAddr is where serve listens unless --addr says otherwise.
const DefaultAddr = "127.0.0.1:8787"

func serverFlags(e *envFlags, c *Config) {
	sc := &c.Server
	e.str(&c.Addr, "addr", "SENDONCE_ADDR", DefaultAddr, "HTTP listen address")
	e.str(&c.OpsAddr, "ops-addr", "SENDONCE_OPS_ADDR", "", "listen address serving only /healthz, /readyz and /metrics, in any role (a worker serves no API: its probes and Prometheus use this; off by default)")
	dbFlag(e, &sc.DB)
	e.str(&sc.Transport, "transport", "SENDONCE_TRANSPORT", transport.DefaultSpec, "capture (local dev inbox), smtp://[user:pass@]host:port[?tls=none|starttls|tls] (relay), mx (direct to the recipients' mail exchangers), ses://[KEY_ID:SECRET@]REGION[?endpoint=URL&configuration_set=NAME] (Amazon SES) or resend://API_KEY@[HOST[:PORT]] (Resend)")
	e.str(&sc.From, "from", "SENDONCE_FROM", app.DefaultFrom, "default From of the default mailbox")
	e.dur(&sc.IdempotencyTTL, "idempotency-ttl", "SENDONCE_IDEMPOTENCY_TTL", idempotency.DefaultTTL, "how long a key replays")
	e.boolean(&sc.RequireIdempotencyKey, "require-idempotency-key", "SENDONCE_REQUIRE_IDEMPOTENCY_KEY", true, "whether POST /v1/send rejects a request without a key")
	e.dur(&sc.RetryBase, "retry-base", "SENDONCE_RETRY_BASE", delivery.DefaultRetryBase, "first retry delay; attempt n waits base·2^(n−1) with jitter, capped at --max-retry-delay")
	e.dur(&sc.MaxRetryDelay, "max-retry-delay", "SENDONCE_MAX_RETRY_DELAY", delivery.DefaultMaxRetryDelay, "the longest wait between two attempts of a send")
	e.integer(&sc.MaxAttempts, "max-attempts", "SENDONCE_MAX_ATTEMPTS", delivery.DefaultMaxAttempts, "delivery attempts before failed (relay transports; mx retries until --max-queue-lifetime)")
	e.dur(&sc.MaxQueueLifetime, "max-queue-lifetime", "SENDONCE_MAX_QUEUE_LIFETIME", delivery.DefaultMaxQueueLifetime, "under mx, how long after it became due a send may wait to be delivered to a destination before it fails there")
	e.str(&sc.MXPort, "mx-port", "SENDONCE_MX_PORT", transport.DefaultMXPort, "the SMTP port dialled on mail exchangers under mx")
	e.str(&sc.HELOName, "helo-name", "SENDONCE_HELO_NAME", transport.DefaultHELOName, "the name the mx transport says in EHLO: this host's name, the one its address's PTR record gives")
	e.str(&sc.Shaping, "shaping", "SENDONCE_SHAPING", "", "a JSON file of traffic shaping for mx laid over the shipped one (docs/deliverability.md)")
	e.list(&sc.EgressSources, "egress-source", "SENDONCE_EGRESS_SOURCE", "NAME=IP[,ehlo=HOSTNAME]: a source address mx connections bind to, used in turn (repeatable; the variable takes several separated by spaces)")
	e.boolean(&sc.DANE, "dane", "SENDONCE_DANE", false, "mx: honour DANE (RFC 7672) — TLSA records that --dns-resolver validated with DNSSEC (the AD bit) make TLS mandatory and name the certificates to accept; use only with a validating resolver on a trusted path (docs/deliverability.md)")
	e.list(&sc.EgressPools, "egress-pool", "SENDONCE_EGRESS_POOL", "NAME=SOURCE[:WEIGHT],…: a pool of --egress-sources, each used in proportion to its weight (default 1) (repeatable)")
	e.list(&sc.StreamPools, "stream-pool", "SENDONCE_STREAM_POOL", "STREAM=POOL: the --egress-pool a stream (transactional or bulk) leaves from; a stream without one uses the sources no stream's pool holds (repeatable)")
	e.list(&sc.EgressWarmups, "egress-warmup", "SENDONCE_EGRESS_WARMUP", "SOURCE=YYYY-MM-DD: the source is new since that day and follows the shipped warm-up schedule, per destination, for 30 days (repeatable)")
	e.str(&sc.TLSCA, "tls-ca", "SENDONCE_TLS_CA", "", "a PEM file of CA certificates trusted besides the system's: mail exchangers' certificates, MTA-STS policy fetches, provider APIs and SNS signing certificates (tests)")
	e.dur(&sc.AttemptLease, "attempt-lease", "SENDONCE_ATTEMPT_LEASE", delivery.DefaultAttemptLease, "how long a worker may hold an attempt before it counts as dead")
	e.dur(&c.ShutdownGrace, "shutdown-grace", "SENDONCE_SHUTDOWN_GRACE", 0, "how long in-flight requests and delivery attempts may take to finish after SIGTERM (0: the larger of 25s and --attempt-lease)")
	e.dur(&c.DrainDelay, "drain-delay", "SENDONCE_DRAIN_DELAY", 0, "after SIGTERM, how long the API keeps serving while GET /readyz answers 503 draining, before the shutdown begins (0: none; behind a load balancer, a few probe periods, e.g. 5s)")
	e.str(&c.Role, "role", "SENDONCE_ROLE", "all", "api, worker or all")
	e.str(&sc.Redis, "redis", "SENDONCE_REDIS", "", "optional redis://… replay cache and in-flight lock in front of the database (the database stays the source of truth)")
	e.integer(&c.ReplayCache, "replay-cache", "SENDONCE_REPLAY_CACHE", idempotency.DefaultReplayCacheEntries, "completed idempotency keys kept in memory to answer replays without a database read (0 turns it off)")
	e.integer(&sc.DBMaxConns, "db-max-conns", "SENDONCE_DB_MAX_CONNS", sqlstore.DefaultMaxConns, "PostgreSQL connection pool size of this process")
	e.dur(&sc.Retention, "retention", "SENDONCE_RETENTION", delivery.DefaultRetention, "how long finished sends (sent, failed, canceled) are kept, and the drafts they were sent from")
	e.dur(&sc.AuditRetention, "audit-retention", "SENDONCE_AUDIT_RETENTION", delivery.DefaultAuditRetention, "how long audit entries (agent key requests) are kept; at least 48h, since the per-day caps count them")
	e.integer(&sc.Workers, "workers", "SENDONCE_WORKERS", delivery.DefaultWorkers, "delivery attempts running at once in this process")
	e.dur(&sc.PollInterval, "poll-interval", "SENDONCE_POLL_INTERVAL", delivery.DefaultPollInterval, "how often idle workers look for new jobs")
	e.str(&c.LogFormat, "log-format", "SENDONCE_LOG_FORMAT", "text", "text or json")
	e.str(&c.LogLevel, "log-level", "SENDONCE_LOG_LEVEL", "info", "debug, info, warn or error")
	e.integer(&c.AccessLogSample, "access-log-sample", "SENDONCE_ACCESS_LOG_SAMPLE", 1, "write one in N of the API's access lines for answers below 400 (every 4xx and 5xx line is written; the metrics count every request)")
	e.str(&sc.DNSResolver, "dns-resolver", "SENDONCE_DNS_RESOLVER", "", "DNS server HOST:PORT for the mx transport and DNS checks (default: the first nameserver of /etc/resolv.conf)")
	e.dur(&sc.DKIMRetireAfter, "dkim-retire-after", "SENDONCE_DKIM_RETIRE_AFTER", app.DefaultDKIMRetireAfter, "after a DKIM key rotation, how long the former key's record stays listed to keep (mail signed with it still verifies) before it is listed for removal")
	e.dur(&sc.DomainCheckInterval, "domain-check-interval", "SENDONCE_DOMAIN_CHECK_INTERVAL", server.DefaultDomainCheckInterval, "how often a worker re-checks the DNS of domains not verified and of those with a DKIM rotation pending (±20% jitter; 1m to 24h)")
	e.str(&c.TLSReceivers, "tls-receivers", "SENDONCE_TLS_RECEIVERS", dnscheck.DefaultReceivers, "comma-separated receiver domains whose mail exchangers the domain check connects to, to see that they offer STARTTLS with a valid certificate (a bulk sender rule; \"none\": not checked)")
	e.str(&sc.OutboundAllow, "outbound-allow", "SENDONCE_OUTBOUND_ALLOW", "", "comma-separated CIDR prefixes, or \"private\", that relays set through the API and mx exchangers may reach besides public addresses (default: public addresses only; --transport is always trusted)")
	e.integer(&sc.RateLimit, "rate-limit", "SENDONCE_RATE_LIMIT", ratelimit.DefaultRequests, "requests an API key may make per --rate-limit-window before 429 rate_limited (0 turns the limit off; keys create --rate-limit overrides it per key); shared between processes through --redis, else counted per process")
	e.dur(&sc.RateLimitWindow, "rate-limit-window", "SENDONCE_RATE_LIMIT_WINDOW", ratelimit.DefaultWindow, "the window --rate-limit counts in")
	e.integer(&c.MaxTemplates, "max-templates", "SENDONCE_MAX_TEMPLATES", core.DefaultMaxTemplates, "templates one tenant may store (0: no cap); past it, creates answer 403 limit_exceeded")
	e.integer(&c.MaxMailboxes, "max-mailboxes", "SENDONCE_MAX_MAILBOXES", core.DefaultMaxMailboxes, "mailboxes one tenant may store (0: no cap)")
	e.integer(&c.MaxDomains, "max-domains", "SENDONCE_MAX_DOMAINS", core.DefaultMaxDomains, "sending domains one tenant may store (0: no cap)")
	e.integer(&c.MaxWebhooks, "max-webhooks", "SENDONCE_MAX_WEBHOOKS", core.DefaultMaxWebhooks, "webhook endpoints one tenant may store (0: no cap)")
	e.integer(&c.MaxSuppressions, "max-suppressions", "SENDONCE_MAX_SUPPRESSIONS", core.DefaultMaxSuppressions, "suppression entries one tenant may add by hand (0: no cap; bounces and complaints always add theirs)")
	e.integer(&c.MaxDrafts, "max-drafts", "SENDONCE_MAX_DRAFTS", core.DefaultMaxDrafts, "drafts one tenant may store, sent ones included until deleted or purged with their send (0: no cap)")
	e.integer(&c.MaxAPIKeys, "max-api-keys", "SENDONCE_MAX_API_KEYS", core.DefaultMaxAPIKeys, "API keys (not revoked) one tenant may create through the API (0: no cap; sendonce keys create is not capped)")
	e.str(&sc.WebhookRetrySchedule, "webhook-retry-schedule", "SENDONCE_WEBHOOK_RETRY_SCHEDULE", webhook.DefaultSchedule, "waits before each retry of a failed webhook delivery, comma-separated; after the last the delivery is failed")
	e.integer(&sc.IMAPSyncDays, "imap-sync-days", "SENDONCE_IMAP_SYNC_DAYS", 30, "how many days back a connected mailbox's first sync reaches (docs/mailboxes.md)")
	e.boolean(&sc.WebhookAllowPrivate, "webhook-allow-private", "SENDONCE_WEBHOOK_ALLOW_PRIVATE", false, "allow webhook endpoints on loopback and private addresses (refused by default)")
	e.integer(&c.MaxRequestSize, "max-request-size", "SENDONCE_MAX_REQUEST_SIZE", kit.DefaultMaxRequestBytes, "largest request body on the send routes, in bytes (other routes: 1 MiB)")
	e.integer(&c.MaxMessageSize, "max-message-size", "SENDONCE_MAX_MESSAGE_SIZE", app.DefaultMaxMessageBytes, "largest message after MIME encoding, attachments included, in bytes")
	e.integer(&c.MaxInflightBytes, "max-inflight-bytes", "SENDONCE_MAX_INFLIGHT_BYTES", kit.DefaultMaxInflightBytes, "bytes of send requests worked on at once, each charged its size plus 128 per JSON value (large ones, 1 MiB or more, at most three quarters together); beyond it a request waits up to 30s, then 503 with Retry-After")
	e.integer(&c.MaxReceivedStorage, "max-received-storage", "SENDONCE_MAX_RECEIVED_STORAGE", app.DefaultMaxReceivedBytes, "raw bytes of received mail one tenant may keep (0: no cap); past it, mail to the tenant's addresses is answered 452 4.2.2")
	e.boolean(&sc.RequireVerifiedDomain, "require-verified-domain", "SENDONCE_REQUIRE_VERIFIED_DOMAIN", false, "refuse (403) a send whose From domain is not one of the tenant's verified domains: for servers whose tenants are strangers (docs/security.md)")
	e.boolean(&c.AttachmentFetch, "attachment-fetch", "SENDONCE_ATTACHMENT_FETCH", false, "let attachments name a URL (path) fetched once at acceptance, public addresses only")
	e.str(&sc.PublicURL, "public-url", "SENDONCE_PUBLIC_URL", "", "the URL people reach this server at, e.g. https://mail.example.com behind a TLS-terminating proxy: https makes the dashboard's cookies Secure and sends Strict-Transport-Security; the base of bulk mail's one-click unsubscribe links (default: http:// and --addr)")
	e.str(&c.Pprof, "pprof", "SENDONCE_PPROF", "", "serve net/http/pprof on this separate address, e.g. 127.0.0.1:6060 (off by default; never expose it: profiles reveal memory contents)")
	// SENDONCE_SECRET_KEY only: as a flag it would show in process lists
	// and in -h's defaults.
	sc.SecretKey = e.getenv("SENDONCE_SECRET_KEY")
	smtpFlags(e, &c.SMTP)
	e.str(&sc.BounceDomain, "bounce-domain", "SENDONCE_BOUNCE_DOMAIN", "", "domain of the VERP envelope senders bounce+TOKEN@DOMAIN every attempt uses, whose MX is --inbound-addr (off by default; see docs/deliverability.md)")
	e.str(&sc.InboundAddr, "inbound-addr", "SENDONCE_INBOUND_ADDR", "", "HOST:PORT of the SMTP listener for mail to receiving addresses and for bounce and complaint mail to --bounce-domain (off by default; see docs/receiving.md)")
	e.str(&sc.InboundName, "inbound-name", "SENDONCE_INBOUND_NAME", "", "host name of the inbound listener: its greeting, its Authentication-Results, and the MX a receiving domain publishes (default: --bounce-domain, else localhost)")
	e.str(&c.InboundTLSCert, "inbound-tls-cert", "SENDONCE_INBOUND_TLS_CERT", "", "PEM certificate (chain) the inbound listener offers STARTTLS with: the name of --inbound-name, which MTA-STS for a receiving domain requires (off by default: no STARTTLS)")
	e.str(&c.InboundTLSKey, "inbound-tls-key", "SENDONCE_INBOUND_TLS_KEY", "", "PEM private key of --inbound-tls-cert")
	e.integer(&c.InboundMaxMemory, "inbound-max-memory", "SENDONCE_INBOUND_MAX_MEMORY", mxserver.DefaultMaxMemory, "bytes of messages the inbound listener reads and stores at once, over all its connections; past it DATA is answered 452 4.3.1 (the sender tries again later)")
	e.dur(&sc.InboundLimits.SessionTimeout, "inbound-session-timeout", "SENDONCE_INBOUND_SESSION_TIMEOUT", mxserver.DefaultSessionTimeout, "how long one inbound SMTP session may last, however active; then 421 and closed")
	e.boolean(&sc.InboundRejectDMARC, "inbound-reject-dmarc", "SENDONCE_INBOUND_REJECT_DMARC", false, "refuse (550 5.7.1) received mail that fails its sender domain's DMARC policy instead of keeping it flagged")
	rep := &sc.Reputation
	e.float(&rep.ComplaintRate, "pause-complaint-rate", "SENDONCE_PAUSE_COMPLAINT_RATE", app.DefaultPauseComplaintRate, "complaints per bulk send handed off in the last 24h at which the tenant's bulk stream pauses (docs/deliverability.md, \"The reputation guard\")")
	e.float(&rep.BounceRate, "pause-bounce-rate", "SENDONCE_PAUSE_BOUNCE_RATE", app.DefaultPauseBounceRate, "permanent bounces per bulk send handed off in the last 24h at which the tenant's bulk stream pauses")
	e.integer(&rep.MinSends, "pause-min-sends", "SENDONCE_PAUSE_MIN_SENDS", app.DefaultPauseMinSends, "bulk sends handed off in the last 24h a tenant needs before either rate may pause its bulk stream")
	c.Providers.define(e, sc)
}

// caps is the --max-* flags as core.Caps.
func (c *Config) caps() core.Caps {
	return core.Caps{
		core.ResourceTemplates: c.MaxTemplates, core.ResourceMailboxes: c.MaxMailboxes,
		core.ResourceDomains: c.MaxDomains, core.ResourceAPIKeys: c.MaxAPIKeys,
		core.ResourceWebhooks: c.MaxWebhooks, core.ResourceSuppressions: c.MaxSuppressions,
		core.ResourceDrafts: c.MaxDrafts,
	}
}

func (c *Config) validate() error {
	switch c.Role {
	case "api", "worker", "all":
	default:
		return fmt.Errorf("--role %q: want api, worker or all", c.Role)
	}
	if c.ShutdownGrace < 0 {
		return fmt.Errorf("--shutdown-grace must be 0 (follow --attempt-lease) or positive")
	}
	if c.DrainDelay < 0 {
		return fmt.Errorf("--drain-delay must be 0 (none) or positive")
	}
	sc := &c.Server
	if min(c.MaxTemplates, c.MaxMailboxes, c.MaxDomains, c.MaxAPIKeys, c.MaxWebhooks, c.MaxSuppressions, c.MaxDrafts) < 0 {
		return fmt.Errorf("--max-templates, --max-mailboxes, --max-domains, --max-api-keys, --max-webhooks, --max-suppressions and --max-drafts must be 0 (no cap) or more")
	}
	if rep := sc.Reputation; !(rep.ComplaintRate > 0 && rep.ComplaintRate <= 1) || !(rep.BounceRate > 0 && rep.BounceRate <= 1) || rep.MinSends < 1 {
		return fmt.Errorf("--pause-complaint-rate and --pause-bounce-rate must be above 0 and at most 1, and --pause-min-sends at least 1")
	}
	if sc.RateLimit < 0 || sc.RateLimitWindow < time.Millisecond {
		return fmt.Errorf("--rate-limit must be 0 (off) or more, and --rate-limit-window at least 1ms")
	}
	if sc.DKIMRetireAfter <= 0 || sc.DomainCheckInterval < time.Minute || sc.DomainCheckInterval > 24*time.Hour {
		return fmt.Errorf("--dkim-retire-after must be positive, and --domain-check-interval from 1m to 24h")
	}
	if sc.IdempotencyTTL <= 0 || sc.RetryBase <= 0 || sc.AttemptLease <= 0 || sc.MaxRetryDelay <= 0 || sc.MaxQueueLifetime <= 0 {
		return fmt.Errorf("--idempotency-ttl, --retry-base, --max-retry-delay, --max-queue-lifetime and --attempt-lease must be positive")
	}
	if sc.PublicURL != "" {
		if u, err := url.Parse(sc.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--public-url %q: want an http or https URL such as https://mail.example.com", sc.PublicURL)
		}
	}
	sc.Addr = c.Addr // the unsubscribe links' base without --public-url
	if sc.RetryBase > sc.MaxRetryDelay {
		return fmt.Errorf("--retry-base must not exceed --max-retry-delay")
	}
	if n, err := strconv.Atoi(sc.MXPort); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("--mx-port %q: want a port number", sc.MXPort)
	}
	if sc.MaxAttempts < 1 || sc.Workers < 1 || sc.DBMaxConns < 1 {
		return fmt.Errorf("--max-attempts, --workers and --db-max-conns must be at least 1")
	}
	if sc.AuditRetention < delivery.MinAuditRetention {
		return fmt.Errorf("--audit-retention must be at least 48h: the agent keys' per-day caps count audit entries")
	}
	if sc.Retention < sc.IdempotencyTTL {
		return fmt.Errorf("--retention must be at least --idempotency-ttl: a replayable key's send must still exist")
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", c.LogFormat)
	}
	if c.AccessLogSample < 1 {
		return fmt.Errorf("--access-log-sample %d: want 1 (every line) or more", c.AccessLogSample)
	}
	if err := app.CheckSecretKey(sc.SecretKey); err != nil {
		return err
	}
	if _, err := webhook.ParseSchedule(sc.WebhookRetrySchedule); err != nil {
		return fmt.Errorf("--webhook-retry-schedule: %v", err)
	}
	if _, err := app.ResolverAddr(sc.DNSResolver); err != nil {
		return fmt.Errorf("--dns-resolver: %v", err)
	}
	receivers, err := dnscheck.ParseReceivers(c.TLSReceivers)
	if err != nil {
		return fmt.Errorf("--tls-receivers: %v", err)
	}
	sc.TLSReceivers = receivers
	if c.MaxMessageSize < 1024 || c.MaxRequestSize < 1024 {
		return fmt.Errorf("--max-message-size and --max-request-size must be at least 1024 bytes")
	}
	if c.MaxInflightBytes < c.MaxRequestSize {
		return fmt.Errorf("--max-inflight-bytes must be at least --max-request-size: a request larger than it could never run")
	}
	if err := c.SMTP.validate(); err != nil {
		return err
	}
	return nil
}
