package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/httpapi"
)

// Config is every server setting. Each is a flag and an environment
// variable; the flag wins.
type Config struct {
	Addr                  string
	DB                    string
	Transport             string
	From                  string
	IdempotencyTTL        time.Duration
	RequireIdempotencyKey bool
	RetryBase             time.Duration
	MaxAttempts           int
	AttemptLease          time.Duration
	Role                  string
	Workers               int
	PollInterval          time.Duration
	LogFormat             string
	LogLevel              string
	// SecretKey comes from SENDONCE_SECRET_KEY only: as a flag it would
	// show in process lists and in -h's defaults.
	SecretKey   string
	DNSResolver string
	DBMaxConns  int
	Redis       string
	ReplayCache int
	Retention   time.Duration
	// AuditRetention is --audit-retention.
	AuditRetention time.Duration
	// OutboundAllow is --outbound-allow (see server.Config).
	OutboundAllow string
	// MaxRequestSize, MaxMessageSize, MaxInflightBytes and
	// AttachmentFetch: see server.Config.
	MaxRequestSize, MaxMessageSize, MaxInflightBytes int
	AttachmentFetch                                  bool
	// Pprof, when set, serves net/http/pprof on this separate address.
	// Off by default; it must not be reachable from outside the host.
	Pprof string
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
	if v, ok := e.env(env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Sprintf("%s=%q: not a duration", env, v))
		} else {
			def = d
		}
	}
	e.fs.DurationVar(p, name, def, usage+" (env "+env+")")
}

func (e *envFlags) integer(p *int, name, env string, def int, usage string) {
	if v, ok := e.env(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Sprintf("%s=%q: not a whole number", env, v))
		} else {
			def = n
		}
	}
	e.fs.IntVar(p, name, def, usage+" (env "+env+")")
}

func (e *envFlags) boolean(p *bool, name, env string, def bool, usage string) {
	if v, ok := e.env(env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Sprintf("%s=%q: not true or false", env, v))
		} else {
			def = b
		}
	}
	e.fs.BoolVar(p, name, def, usage+" (env "+env+")")
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

func serverFlags(e *envFlags, c *Config) {
	e.str(&c.Addr, "addr", "SENDONCE_ADDR", "127.0.0.1:8787", "HTTP listen address")
	dbFlag(e, &c.DB)
	e.str(&c.Transport, "transport", "SENDONCE_TRANSPORT", "capture", "capture (local dev inbox), smtp://[user:pass@]host:port[?tls=none|starttls|tls] (relay) or mx (direct to the recipients' mail exchangers)")
	e.str(&c.From, "from", "SENDONCE_FROM", "sendonce@localhost", "default From of the default mailbox")
	e.dur(&c.IdempotencyTTL, "idempotency-ttl", "SENDONCE_IDEMPOTENCY_TTL", idempotency.DefaultTTL, "how long a key replays")
	e.boolean(&c.RequireIdempotencyKey, "require-idempotency-key", "SENDONCE_REQUIRE_IDEMPOTENCY_KEY", true, "whether POST /v1/send rejects a request without a key")
	e.dur(&c.RetryBase, "retry-base", "SENDONCE_RETRY_BASE", 5*time.Second, "first retry delay; attempt n waits base·2^(n−1) with jitter, capped at 1h")
	e.integer(&c.MaxAttempts, "max-attempts", "SENDONCE_MAX_ATTEMPTS", 8, "delivery attempts before failed")
	e.dur(&c.AttemptLease, "attempt-lease", "SENDONCE_ATTEMPT_LEASE", 30*time.Second, "how long a worker may hold an attempt before it counts as dead")
	e.str(&c.Role, "role", "SENDONCE_ROLE", "all", "api, worker or all")
	e.str(&c.Redis, "redis", "SENDONCE_REDIS", "", "optional redis://… replay cache and in-flight lock in front of the database (the database stays the source of truth)")
	e.integer(&c.ReplayCache, "replay-cache", "SENDONCE_REPLAY_CACHE", 10000, "completed idempotency keys kept in memory to answer replays without a database read (0 turns it off)")
	e.integer(&c.DBMaxConns, "db-max-conns", "SENDONCE_DB_MAX_CONNS", 20, "PostgreSQL connection pool size of this process")
	e.dur(&c.Retention, "retention", "SENDONCE_RETENTION", 30*24*time.Hour, "how long finished sends (sent, failed, canceled) are kept")
	e.dur(&c.AuditRetention, "audit-retention", "SENDONCE_AUDIT_RETENTION", 90*24*time.Hour, "how long audit entries (agent key requests) are kept; at least 48h, since the per-day caps count them")
	e.integer(&c.Workers, "workers", "SENDONCE_WORKERS", 100, "delivery attempts running at once in this process")
	e.dur(&c.PollInterval, "poll-interval", "SENDONCE_POLL_INTERVAL", 200*time.Millisecond, "how often idle workers look for new jobs")
	e.str(&c.LogFormat, "log-format", "SENDONCE_LOG_FORMAT", "text", "text or json")
	e.str(&c.LogLevel, "log-level", "SENDONCE_LOG_LEVEL", "info", "debug, info, warn or error")
	e.str(&c.DNSResolver, "dns-resolver", "SENDONCE_DNS_RESOLVER", "", "DNS server HOST:PORT for the mx transport and DNS checks (default: the first nameserver of /etc/resolv.conf)")
	e.str(&c.OutboundAllow, "outbound-allow", "SENDONCE_OUTBOUND_ALLOW", "", "comma-separated CIDR prefixes, or \"private\", that relays set through the API and mx exchangers may reach besides public addresses (default: public addresses only; --transport is always trusted)")
	e.integer(&c.MaxRequestSize, "max-request-size", "SENDONCE_MAX_REQUEST_SIZE", httpapi.DefaultMaxRequestBytes, "largest request body on the send routes, in bytes (other routes: 1 MiB)")
	e.integer(&c.MaxMessageSize, "max-message-size", "SENDONCE_MAX_MESSAGE_SIZE", app.DefaultMaxMessageBytes, "largest message after MIME encoding, attachments included, in bytes")
	e.integer(&c.MaxInflightBytes, "max-inflight-bytes", "SENDONCE_MAX_INFLIGHT_BYTES", httpapi.DefaultMaxInflightBytes, "request bytes of large sends (1 MiB or more) worked on at once; beyond it a request waits up to 30s, then 503 with Retry-After")
	e.boolean(&c.AttachmentFetch, "attachment-fetch", "SENDONCE_ATTACHMENT_FETCH", false, "let attachments name a URL (path) fetched once at acceptance, public addresses only")
	e.str(&c.Pprof, "pprof", "SENDONCE_PPROF", "", "serve net/http/pprof on this separate address, e.g. 127.0.0.1:6060 (off by default; never expose it: profiles reveal memory contents)")
	c.SecretKey = e.getenv("SENDONCE_SECRET_KEY")
}

func (c *Config) validate() error {
	switch c.Role {
	case "api", "worker", "all":
	default:
		return fmt.Errorf("--role %q: want api, worker or all", c.Role)
	}
	if c.IdempotencyTTL <= 0 || c.RetryBase <= 0 || c.AttemptLease <= 0 {
		return fmt.Errorf("--idempotency-ttl, --retry-base and --attempt-lease must be positive")
	}
	if c.MaxAttempts < 1 || c.Workers < 1 || c.DBMaxConns < 1 {
		return fmt.Errorf("--max-attempts, --workers and --db-max-conns must be at least 1")
	}
	if c.AuditRetention < 48*time.Hour {
		return fmt.Errorf("--audit-retention must be at least 48h: the agent keys' per-day caps count audit entries")
	}
	if c.Retention < c.IdempotencyTTL {
		return fmt.Errorf("--retention must be at least --idempotency-ttl: a replayable key's send must still exist")
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", c.LogFormat)
	}
	if err := app.CheckSecretKey(c.SecretKey); err != nil {
		return err
	}
	if _, err := app.ResolverAddr(c.DNSResolver); err != nil {
		return fmt.Errorf("--dns-resolver: %v", err)
	}
	return nil
}
