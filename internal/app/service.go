package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/imapurl"
	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/tracing"
)

// DefaultFrom is the default mailbox's address unless Config (--from)
// says otherwise.
const DefaultFrom = "sendonce@localhost"

// Config holds what the use cases need from the server's settings.
type Config struct {
	// DefaultFrom is the address of every tenant's default mailbox.
	// Defaults to "sendonce@localhost".
	DefaultFrom string
	// SecretKey (SENDONCE_SECRET_KEY) seals the DKIM private keys stored
	// in the database; empty stores them unencrypted. When set it must be
	// at least dkim.MinSecretLength bytes (see CheckSecretKey).
	SecretKey string
	// RequireVerifiedDomain (--require-verified-domain) refuses sends
	// whose From domain is not one of the tenant's verified domains.
	RequireVerifiedDomain bool
	// Egress are the mx transport's egress sources: domain checks verify
	// their reverse DNS and that SPF covers them.
	Egress []dnscheck.Egress
	// DNSResolver is the "host:port" DNS server of domain checks. Defaults
	// to the first nameserver of /etc/resolv.conf.
	DNSResolver string
	// DKIMRetireAfter (--dkim-retire-after) is how long after a DKIM key
	// rotation the former key's record is listed for removal. Defaults to
	// DefaultDKIMRetireAfter.
	DKIMRetireAfter time.Duration
	// Outbound (--outbound-allow) judges the destinations a tenant chooses
	// through the API (mailbox relays) and the mx transport's exchangers.
	// nil allows global unicast addresses only.
	Outbound *netpolicy.Policy
	// Caps bounds what one tenant may store (CheckCap). nil: no caps, as
	// for the CLI, which is the operator's; the server passes
	// its --max-* flags (defaults core.DefaultMax*).
	Caps core.Caps
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// AttachmentFetch (--attachment-fetch) lets an attachment name a URL
	// (path) to fetch at acceptance. Defaults to off.
	AttachmentFetch bool
	// MaxMessageBytes (--max-message-size) bounds a message after MIME
	// encoding. Defaults to DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// RateLimit requests per RateLimitWindow is the server's request limit
	// (--rate-limit) of a key that sets none: CreateKeyBy refuses a new key
	// a limit above its creator's. Off when either is 0.
	RateLimit       int
	RateLimitWindow time.Duration
	// MaxReceivedBytes bounds a tenant's stored received mail (raw bytes):
	// 0 means DefaultMaxReceivedBytes, negative no bound.
	MaxReceivedBytes int64
	// MaxDMARCReports is how many DMARC reports a tenant keeps before the
	// oldest give way. Defaults to core.MaxDMARCReportsPerTenant.
	MaxDMARCReports int
	// InboundName is the host name of the inbound listener, which the MX
	// record of a receiving domain names (--inbound-name).
	InboundName string
	// NoInboundListener: this process runs no inbound listener
	// (--inbound-addr unset), so a receiving address made here gets mail
	// only if another process of the deployment listens
	// (ReceivingWarning).
	NoInboundListener bool
	// PublicURL is where people reach the HTTP API (--public-url, else
	// http://{--addr}): the base of the one-click unsubscribe links.
	PublicURL string
	// UnsubscribeDomain is the domain of the unsubscribe headers'
	// mailto: address (unsubscribe+TOKEN@domain), which the inbound
	// listener takes; "" leaves the mailto: form out (no listener).
	UnsubscribeDomain string
	// IMAPProbe logs in to a connected mailbox's IMAP server and out,
	// through the outbound policy, and says why it could not as a class
	// ("" when it could): the mailbox status check. nil: not checked.
	IMAPProbe func(ctx context.Context, cfg imapurl.Config) (failure string)
	// TracerProvider takes the spans of acceptance and receiving
	// (internal/tracing). Defaults to none: no span is made.
	TracerProvider trace.TracerProvider
	// Idempotency configures the process's one idempotency engine
	// (Service.Idempotency). Defaults to the idempotency package's.
	Idempotency IdempotencyConfig
	// SenderRules configures the domain check's bulk sender rules
	// section (senderrules.go): --bounce-domain, --tls-receivers,
	// --helo-name.
	SenderRules SenderRulesConfig
	// Reputation are the reputation guard's thresholds
	// (--pause-complaint-rate, --pause-bounce-rate, --pause-min-sends);
	// zero fields take the defaults (DefaultPause…).
	Reputation ReputationThresholds
}

// Service implements the use cases.
type Service struct {
	store     core.Store
	cfg       Config
	logger    *slog.Logger
	keys      ttlCache[*core.APIKey]
	mailboxes ttlCache[*core.Mailbox]
	dlKey     downloadKey
	unsubKey  unsubscribeKey
	// fetches holds a token per attachment download running
	// (MaxConcurrentFetches).
	fetches chan struct{}
	// scopedSince: when the store began keeping the current key forms
	// (OlderFormReplay).
	scopedSince scopedSince
	// imapWake tells this process's IMAP syncer that a mailbox was
	// connected (IMAPChanged), so its first sync need not wait for the
	// next scan.
	imapWake chan struct{}
	tracer   tracing.Tracer
	// probes keeps the domain check's TLS probes of the major receivers
	// between checks (dnscheck.ProbeCache).
	probes *dnscheck.ProbeCache
	// idem is the process's one idempotency engine (Idempotency), built
	// on first use from cfg.Idempotency.
	idem     *idempotency.Engine
	idemOnce sync.Once
}

// New returns a Service.
func New(store core.Store, cfg Config, logger *slog.Logger) *Service {
	defaults.Set(&cfg.DefaultFrom, DefaultFrom)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	defaults.Set(&cfg.MaxMessageBytes, DefaultMaxMessageBytes)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{store: store, cfg: cfg, logger: logger, fetches: make(chan struct{}, MaxConcurrentFetches), imapWake: make(chan struct{}, 1),
		keys: ttlCache[*core.APIKey]{ttl: KeyCacheTTL}, mailboxes: ttlCache[*core.Mailbox]{ttl: MailboxCacheTTL},
		tracer: tracing.New(cfg.TracerProvider, "github.com/sendonce/sendonce/internal/app"),
		probes: dnscheck.NewProbeCache(0, cfg.Now)}
	return s
}

// Now returns the service clock's time in UTC.
func (s *Service) Now() time.Time { return s.cfg.Now().UTC() }

// InTx is the transactor of the one write protocol (idempotency.Run):
// the doors pass it to the protocol as its InTx, and the protocol hands
// the transaction to a step that gives it to service methods (AcceptSend,
// AddDomain, …). A door calls no method of the transaction itself, and
// opens none for anything else: a change outside the protocol is a
// service method that opens its own.
func (s *Service) InTx(ctx context.Context, fn func(tx core.Tx) error) error {
	return s.store.InTx(ctx, fn)
}

// NewID returns a time-ordered id with the given prefix, e.g. "snd_01j…".
// Ordering by id is ordering by creation, which list cursors rely on.
func NewID(prefix string) string {
	return prefix + strings.ToLower(ulid.Make().String())
}

// secretPrefix marks sendonce API keys so that secret scanners and people
// recognise them.
const secretPrefix = "so_"

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// NewKeyParams describes a key to create.
type NewKeyParams struct {
	Name             string
	Tenant           string // defaults to "default"
	Scopes           []core.Scope
	Mailboxes        []string
	RequiresApproval bool
	// Agent, AllowRecipients, MaxPerHour and MaxPerDay: see core.APIKey.
	Agent                 bool
	AllowRecipients       []string
	MaxPerHour, MaxPerDay int
	// RateLimit: see core.APIKey.
	RateLimit int
	// DefaultStream: see core.APIKey ("": transactional).
	DefaultStream core.Stream
}

// CreateKey stores a new API key and returns it with its secret, which is
// never stored and cannot be shown again.
func (s *Service) CreateKey(ctx context.Context, p NewKeyParams) (k *core.APIKey, secret string, err error) {
	err = s.store.InTx(ctx, func(tx core.Tx) error {
		k, secret, err = s.CreateKeyTx(ctx, tx, p)
		return err
	})
	return k, secret, err
}

// CreateKeyTx is CreateKey in the caller's transaction (an idempotent
// route stores its answer, the secret included, in the same one).
func (s *Service) CreateKeyTx(ctx context.Context, tx core.Tx, p NewKeyParams) (*core.APIKey, string, error) {
	defaults.Set(&p.Tenant, "default")
	if strings.TrimSpace(p.Name) == "" {
		return nil, "", core.Errorf(core.CodeValidation, "name", "a key needs a name")
	}
	if len(p.Scopes) == 0 {
		return nil, "", core.Errorf(core.CodeValidation, "scopes", "a key needs at least one scope")
	}
	allow, err := NormalizeAllowlist(p.AllowRecipients)
	if err != nil {
		return nil, "", err
	}
	if p.MaxPerHour < 0 || p.MaxPerDay < 0 {
		return nil, "", core.Errorf(core.CodeValidation, "max_per_hour", "caps are 0 (none) or more")
	}
	if p.DefaultStream != "" && !p.DefaultStream.Valid() {
		return nil, "", core.Errorf(core.CodeValidation, "stream", "a key's default stream is transactional or bulk")
	}
	var idb [10]byte
	var secb [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, "", fmt.Errorf("generate key id: %w", err)
	}
	if _, err := rand.Read(secb[:]); err != nil {
		return nil, "", fmt.Errorf("generate key secret: %w", err)
	}
	id := strings.ToLower(b32.EncodeToString(idb[:]))
	secret := secretPrefix + id + "_" + strings.ToLower(b32.EncodeToString(secb[:]))
	k := &core.APIKey{
		ID: id, Tenant: p.Tenant, Name: p.Name, SecretHash: hashSecret(secret),
		Scopes: p.Scopes, Mailboxes: p.Mailboxes, RequiresApproval: p.RequiresApproval, CreatedAt: s.Now(),
		Agent: p.Agent, AllowRecipients: allow, MaxPerHour: p.MaxPerHour, MaxPerDay: p.MaxPerDay,
		RateLimit: p.RateLimit, DefaultStream: p.DefaultStream,
	}
	if err := tx.InsertAPIKey(ctx, k); err != nil {
		return nil, "", fmt.Errorf("create key: %w", err)
	}
	if err := s.CheckCap(ctx, tx, core.ResourceAPIKeys, k.Tenant); err != nil {
		return nil, "", err
	}
	return k, secret, nil
}

// TenantKeys returns the tenant's keys that are not revoked, oldest first.
func (s *Service) TenantKeys(ctx context.Context, tenant string) ([]*core.APIKey, error) {
	all, err := s.store.ListAPIKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []*core.APIKey
	for _, k := range all {
		if k.Tenant == tenant && k.RevokedAt == nil {
			out = append(out, k)
		}
	}
	return out, nil
}

// IdempotencyKeyPeers returns the ids of the tenant's keys, revoked ones
// too, that decide Idempotency-Keys in k's namespace (core.APIKey
// SharesIdempotencyKeys): the keys whose sends k's lookup by key may find,
// since a retry through any of them replays the others' requests.
func (s *Service) IdempotencyKeyPeers(ctx context.Context, k *core.APIKey) ([]string, error) {
	all, err := s.store.ListAPIKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	var ids []string
	for _, o := range all {
		if o.SharesIdempotencyKeys(k) {
			ids = append(ids, o.ID)
		}
	}
	return ids, nil
}

// RevokeTenantKey revokes the tenant's key id; ErrNotFound when the tenant
// has no such key (another tenant's key is not found either) or it is
// revoked already.
func (s *Service) RevokeTenantKey(ctx context.Context, tenant, id string) error {
	k, err := s.store.APIKey(ctx, id)
	if err != nil {
		return err
	}
	if k.Tenant != tenant || k.RevokedAt != nil {
		return core.ErrNotFound
	}
	return s.RevokeKey(ctx, id)
}

// RevokeKey revokes a key at once.
func (s *Service) RevokeKey(ctx context.Context, id string) error {
	defer s.keys.forget(id) // after the commit: no reader can cache the old record past it
	return s.store.InTx(ctx, func(tx core.Tx) error { return tx.RevokeAPIKey(ctx, id, s.Now()) })
}

// ErrUnauthorized is returned for a missing, malformed, unknown or revoked
// secret. It never says which.
var ErrUnauthorized = &core.Error{Code: core.CodeUnauthorized, Message: "missing or invalid API key"}

// Authenticate returns the key whose secret this is.
func (s *Service) Authenticate(ctx context.Context, secret string) (*core.APIKey, error) {
	rest, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, ErrUnauthorized
	}
	id, _, ok := strings.Cut(rest, "_")
	if !ok || id == "" || len(id) > 64 {
		return nil, ErrUnauthorized
	}
	// The cache's clock is the machine's, not the service clock (which
	// tests may stop): it bounds staleness in real time.
	now := time.Now()
	k, ok := s.keys.get(id, now)
	if !ok {
		gen := s.keys.generation()
		var err error
		k, err = s.store.APIKey(ctx, id)
		if errors.Is(err, core.ErrNotFound) {
			return nil, ErrUnauthorized
		}
		if err != nil {
			return nil, fmt.Errorf("authenticate: %w", err)
		}
		s.keys.put(id, k, now, gen)
	}
	if subtle.ConstantTimeCompare(k.SecretHash, hashSecret(secret)) != 1 || k.RevokedAt != nil {
		return nil, ErrUnauthorized
	}
	return k, nil
}

// KeyFingerprint is a short, non-secret tag for logs: it identifies a key
// without revealing anything usable.
func KeyFingerprint(k *core.APIKey) string {
	h := sha256.Sum256([]byte(k.ID))
	return hex.EncodeToString(h[:4])
}

// Outbound is the policy for connections made on a tenant's behalf.
func (s *Service) Outbound() *netpolicy.Policy { return s.cfg.Outbound }
