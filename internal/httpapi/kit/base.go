package kit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/accesslog"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/ratelimit"
	"github.com/sendonce/sendonce/internal/sns"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/internal/webhook"
	"go.opentelemetry.io/otel/trace"
)

// Config holds the HTTP layer's settings.
type Config struct {
	// Version is the binary's version, named by /healthz.
	Version string
	// RequireIdempotencyKey makes POST /v1/send refuse requests without a
	// key. Defaults to false here; the binary's flag defaults to true.
	RequireIdempotencyKey bool
	// MaxBodyBytes bounds a request body. Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxRequestBytes (--max-request-size) bounds a request body on the
	// send routes. Defaults to DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// MaxInflightBytes (--max-inflight-bytes) bounds the send requests
	// worked on at once, each charged its body and what decoding it costs
	// (limits.go). Defaults to DefaultMaxInflightBytes.
	MaxInflightBytes int64
	// InflightWait is how long a large request waits for room under
	// MaxInflightBytes before its 503. Defaults to DefaultInflightWait.
	InflightWait time.Duration
	// DefaultTransport is the server's --transport ("capture", "mx" or an
	// smtp:// URL): the relay GET /api/public/v1/mailboxes/{id}/status
	// checks for mailboxes without their own. Defaults to "capture".
	DefaultTransport string
	// RateLimit is every API key's request limit (--rate-limit per
	// --rate-limit-window), unless the key sets its own. Defaults to
	// none here; the binary's flags default to ratelimit.DefaultRequests.
	RateLimit ratelimit.Limit
	// Limiter counts the requests: ratelimit.Redis to share the limit
	// between processes. Defaults to ratelimit.NewMemory on the
	// service's clock.
	Limiter ratelimit.Limiter
	// Reads is what the API lists and shows (the server's store).
	// Required.
	Reads Reads
	// Webhooks serves /v1/webhooks and Resend's /webhooks. Required.
	Webhooks *webhook.Service
	// Dashboard, when set, serves the web dashboard at / and under /ui/
	// (internal/dashboard). Defaults to none.
	Dashboard http.Handler
	// Providers configures the provider intake routes (providers.go).
	Providers ProvidersConfig
	// Destinations, when set, reports the mx destinations this process
	// handed a tenant's sends to, and their shaping
	// (GET /v1/admin/destinations).
	Destinations func(tenant string) any
	// AccessLog takes the one line per request. Defaults to the logger
	// given to NewServer (accesslog.Slog).
	AccessLog accesslog.Logger
	// SecretKey is SENDONCE_SECRET_KEY: with it, stored answers that carry
	// a secret (a webhook's signing secret) are sealed (sealed.go).
	SecretKey string
	// Ready answers GET /readyz: "" when the process may take traffic,
	// else the class of why not (the NotReady* constants). Defaults to
	// Reads.Ping alone: ready when the database answers.
	Ready func(ctx context.Context) string
	// TracerProvider takes a server span per request (tracing.go).
	// Defaults to none: no span is made.
	TracerProvider trace.TracerProvider
}

// The reasons GET /readyz gives with its 503: classes, never an error's
// text.
const (
	// NotReadyStarting: the process's listeners are not all bound yet.
	NotReadyStarting = "starting"
	// NotReadyDraining: the process was told to stop and is draining.
	NotReadyDraining = "draining"
	// NotReadyDatabase: the database does not answer in time.
	NotReadyDatabase = "database"
	// NotReadyMigrations: the database lacks a migration this binary has.
	NotReadyMigrations = "migrations"
)

// Base is what every floor of the API shares: the service, the
// idempotency engine, the limits and the request log.
type Base struct {
	Svc     *app.Service
	Reads   Reads
	Metrics *metrics.Metrics
	Cfg     Config
	Logger  *slog.Logger
	Idem    *idempotency.Engine
	// FP fingerprints bodies, remembering recent ones: a retry's bytes are
	// hashed, not canonicalised again.
	FP      *idempotency.FingerprintMemo
	Limiter ratelimit.Limiter
	Hooks   *webhook.Service
	// Inflight bounds the send requests in progress.
	Inflight  *Inflight
	AccessLog accesslog.Logger
	Tracer    tracing.Tracer
}

type ctxKey int

const APIKeyCtx ctxKey = 1

func APIKeyFrom(ctx context.Context) *core.APIKey {
	k, _ := ctx.Value(APIKeyCtx).(*core.APIKey)
	return k
}

// Auth checks the bearer secret and the scope before anything else runs; its
// 401 and 403 never reach the idempotency layer.
func (s *Base) Auth(scope core.Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := Bearer(r.Header)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sendonce"`)
			WriteError(w, r, s.Logger, app.ErrUnauthorized)
			return
		}
		key, err := s.Svc.Authenticate(r.Context(), secret)
		if err != nil {
			if core.ErrorCode(err) == core.CodeUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sendonce"`)
			}
			WriteError(w, r, s.Logger, err)
			return
		}
		if err := s.RateLimit(w, r, key); err != nil {
			WriteError(w, r, s.Logger, err)
			return
		}
		if !key.Has(scope) {
			WriteError(w, r, s.Logger, core.Errorf(core.CodeForbidden, "", "this API key lacks the %q scope", scope))
			return
		}
		next.ServeHTTP(w, WithKey(w, r, key))
	})
}

// Bearer returns the secret of the one Authorization header, whose scheme
// name is case-insensitive (RFC 9110 §11.1).
func Bearer(h http.Header) (string, bool) {
	vals := h.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	scheme, secret, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(secret), true
}

type loggingWriter struct {
	http.ResponseWriter
	status int
	keyID  string
}

func (w *loggingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (the
// dashboard's event streams flush and lift the write deadline).
func (w *loggingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *loggingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// LogRequests writes one line per request: never a header value, a secret or
// a body.
func (s *Base) LogRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := &reqState{srv: s, lw: loggingWriter{ResponseWriter: w}}
		lw := &st.lw
		ctx := r.Context()
		var span trace.Span
		if s.Tracer.Enabled() {
			ctx, span = s.startRequest(r)
		}
		r = r.WithContext(&stateCtx{Context: ctx, st: st})
		defer func() {
			if st.releaseAtEnd {
				s.Inflight.all.Release(st.charge.held)
			}
			if p := recover(); p != nil {
				s.Logger.ErrorContext(r.Context(), "panic in handler", slog.Any("panic", p), slog.String("path", r.URL.Path))
				if lw.status == 0 {
					WriteJSON(lw, http.StatusInternalServerError, NewErrorBody(core.CodeInternal, "internal error", ""))
				}
			}
			if s.Metrics != nil {
				s.Metrics.HTTPRequest(lw.status)
			}
			s.AccessLog.Log(r.Context(), accesslog.Line{Time: time.Now(), Method: r.Method, Route: r.Pattern, Path: r.URL.Path,
				Status: lw.status, Duration: time.Since(start), Key: lw.keyID, Replayed: lw.Header().Get("Idempotent-Replayed") == "true"})
			if span != nil {
				endRequest(span, r, lw.status, st.key)
			}
		}()
		next.ServeHTTP(lw, r)
	})
}

// sendRoutes take bodies up to MaxRequestBytes (attachments); every other
// route up to MaxBodyBytes.
var sendRoutes = map[string]bool{
	"POST /v1/send": true, "POST /v1/send/preview": true, "POST /api/public/v1/mailboxes/{id}/send": true,
	"POST /emails": true, "POST /emails/batch": true,
}

// ReadBody reads at most the route's limit; the error is the 413 to send.
// A body that declares its length is read into one buffer of that size.
func (s *Base) ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.Cfg.MaxBodyBytes
	if sendRoutes[r.Pattern] {
		limit = s.Cfg.MaxRequestBytes
	}
	if r.ContentLength > limit {
		return nil, ApiError(CodePayloadTooLarge, "", "request body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead) // ReadFrom's last read finds EOF without growing
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, ApiError(CodePayloadTooLarge, "", "request body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
		}
		return nil, ApiError(core.CodeInvalidJSON, "", "could not read the request body")
	}
	// Before any decoder or the fingerprint sees it: see jsonshape.go.
	shape, err := scanJSONShape(body)
	if err != nil {
		return nil, err
	}
	if err := s.chargeMore(r, shape.cost(int64(len(body)), s.Inflight.largeLimit)); err != nil {
		w.Header().Set("Retry-After", s.retryAfter())
		return nil, err
	}
	return body, nil
}

// ProvidersConfig is what the intake routes need.
type ProvidersConfig struct {
	// SNS verifies SNS messages; nil (or no SNSTopics) turns POST
	// /v1/providers/ses/events off (404).
	SNS *sns.Verifier
	// SNSTopics are the ARNs of the only topics whose messages the SES
	// route takes (--ses-sns-topic). A signature only proves that some AWS
	// account's topic sent a message, and anyone can create one.
	SNSTopics []string
	// ResendSecret is --resend-webhook-secret; "" refuses POST
	// /v1/providers/resend/events.
	ResendSecret string
}

// NewBase fills cfg's defaults and builds what every floor shares.
func NewBase(svc *app.Service, m *metrics.Metrics, cfg Config, logger *slog.Logger) *Base {
	defaults.Set(&cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	defaults.Set(&cfg.MaxRequestBytes, DefaultMaxRequestBytes)
	defaults.Set(&cfg.MaxInflightBytes, DefaultMaxInflightBytes)
	defaults.Set(&cfg.InflightWait, DefaultInflightWait)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Base{Svc: svc, Reads: cfg.Reads, Metrics: m, Cfg: cfg, Logger: logger, Limiter: cfg.Limiter, Hooks: cfg.Webhooks,
		Inflight: NewInflight(cfg.MaxInflightBytes), Tracer: tracing.New(cfg.TracerProvider, "github.com/sendonce/sendonce/internal/httpapi")}
	if s.Limiter == nil {
		s.Limiter = ratelimit.NewMemory(svc.Now)
	}
	if s.AccessLog = cfg.AccessLog; s.AccessLog == nil {
		s.AccessLog = accesslog.Slog{L: logger}
	}
	s.FP = idempotency.NewFingerprintMemo(idempotency.DefaultFingerprintMemo)
	s.Idem = svc.Idempotency()
	return s
}
