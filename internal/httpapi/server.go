package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/accesslog"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/ratelimit"
	"github.com/sendonce/sendonce/internal/webhook"
)

// Config holds the HTTP layer's settings.
type Config struct {
	// Version is the binary's version, named by /healthz.
	Version string
	// RequireIdempotencyKey makes POST /v1/send refuse requests without a
	// key. Defaults to false here; the binary's flag defaults to true.
	RequireIdempotencyKey bool
	// Idempotency is the process's idempotency engine, shared with every
	// other door (app.Service.NewIdempotencyEngine). Defaults to one of
	// its own on the service's store, with the package's defaults.
	Idempotency *idempotency.Engine
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

// Server is the HTTP API.
type Server struct {
	svc     *app.Service
	reads   Reads
	metrics *metrics.Metrics
	cfg     Config
	logger  *slog.Logger
	mux     *http.ServeMux
	idem    *idempotency.Engine
	// fp fingerprints bodies, remembering recent ones: a retry's bytes are
	// hashed, not canonicalised again.
	fp      *idempotency.FingerprintMemo
	limiter ratelimit.Limiter
	hooks   *webhook.Service
	// inflight bounds the send requests in progress.
	inflight  *inflight
	accessLog accesslog.Logger
}

// NewServer returns the API as an http.Handler.
func NewServer(svc *app.Service, m *metrics.Metrics, cfg Config, logger *slog.Logger) http.Handler {
	s := newServer(svc, m, cfg, logger)
	s.routes()
	return s.logRequests(s.mux)
}

// NewOps returns what an operator's probes and scrapers ask of any
// process, the API's or a worker's: GET /healthz, GET /readyz and
// GET /metrics, and nothing else (--ops-addr).
func NewOps(svc *app.Service, m *metrics.Metrics, cfg Config, logger *slog.Logger) http.Handler {
	s := newServer(svc, m, cfg, logger)
	s.mux.HandleFunc("GET /healthz", s.handleHealthz)
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	if m != nil {
		s.mux.Handle("GET /metrics", m.Handler())
	}
	return s.mux
}

func newServer(svc *app.Service, m *metrics.Metrics, cfg Config, logger *slog.Logger) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxInflightBytes <= 0 {
		cfg.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if cfg.InflightWait <= 0 {
		cfg.InflightWait = DefaultInflightWait
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{svc: svc, reads: cfg.Reads, metrics: m, cfg: cfg, logger: logger, mux: http.NewServeMux(), limiter: cfg.Limiter, hooks: cfg.Webhooks,
		inflight: newInflight(cfg.MaxInflightBytes)}
	if s.limiter == nil {
		s.limiter = ratelimit.NewMemory(svc.Now)
	}
	if s.accessLog = cfg.AccessLog; s.accessLog == nil {
		s.accessLog = accesslog.Slog{L: logger}
	}
	s.fp = idempotency.NewFingerprintMemo(idempotency.DefaultFingerprintMemo)
	if s.idem = cfg.Idempotency; s.idem == nil {
		s.idem = svc.NewIdempotencyEngine(app.IdempotencyConfig{Logger: logger})
	}
	return s
}

type ctxKey int

const apiKeyCtx ctxKey = 1

func apiKeyFrom(ctx context.Context) *core.APIKey {
	k, _ := ctx.Value(apiKeyCtx).(*core.APIKey)
	return k
}

// auth checks the bearer secret and the scope before anything else runs; its
// 401 and 403 never reach the idempotency layer.
func (s *Server) auth(scope core.Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := bearer(r.Header)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sendonce"`)
			writeError(w, r, s.logger, app.ErrUnauthorized)
			return
		}
		key, err := s.svc.Authenticate(r.Context(), secret)
		if err != nil {
			if core.ErrorCode(err) == core.CodeUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sendonce"`)
			}
			writeError(w, r, s.logger, err)
			return
		}
		if err := s.rateLimit(w, r, key); err != nil {
			writeError(w, r, s.logger, err)
			return
		}
		if !key.Has(scope) {
			writeError(w, r, s.logger, core.Errorf(core.CodeForbidden, "", "this API key lacks the %q scope", scope))
			return
		}
		next.ServeHTTP(w, withKey(w, r, key))
	})
}

// bearer returns the secret of the one Authorization header, whose scheme
// name is case-insensitive (RFC 9110 §11.1).
func bearer(h http.Header) (string, bool) {
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

// logRequests writes one line per request: never a header value, a secret or
// a body.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := &reqState{srv: s, lw: loggingWriter{ResponseWriter: w}}
		lw := &st.lw
		r = r.WithContext(&stateCtx{Context: r.Context(), st: st})
		defer func() {
			if st.releaseAtEnd {
				s.inflight.all.Release(st.charge.held)
			}
			if p := recover(); p != nil {
				s.logger.ErrorContext(r.Context(), "panic in handler", slog.Any("panic", p), slog.String("path", r.URL.Path))
				if lw.status == 0 {
					writeJSON(lw, http.StatusInternalServerError, newErrorBody(core.CodeInternal, "internal error", ""))
				}
			}
			if s.metrics != nil {
				s.metrics.HTTPRequest(lw.status)
			}
			s.accessLog.Log(r.Context(), accesslog.Line{Time: time.Now(), Method: r.Method, Route: r.Pattern, Path: r.URL.Path,
				Status: lw.status, Duration: time.Since(start), Key: lw.keyID, Replayed: lw.Header().Get("Idempotent-Replayed") == "true"})
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

// readBody reads at most the route's limit; the error is the 413 to send.
// A body that declares its length is read into one buffer of that size.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.cfg.MaxBodyBytes
	if sendRoutes[r.Pattern] {
		limit = s.cfg.MaxRequestBytes
	}
	if r.ContentLength > limit {
		return nil, apiError(codePayloadTooLarge, "", "request body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
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
			return nil, apiError(codePayloadTooLarge, "", "request body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
		}
		return nil, apiError(core.CodeInvalidJSON, "", "could not read the request body")
	}
	// Before any decoder or the fingerprint sees it: see jsonshape.go.
	shape, err := scanJSONShape(body)
	if err != nil {
		return nil, err
	}
	if err := s.chargeMore(r, shape.cost(int64(len(body)), s.inflight.largeLimit)); err != nil {
		w.Header().Set("Retry-After", s.retryAfter())
		return nil, err
	}
	return body, nil
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	if err := s.reads.Ping(r.Context()); err != nil {
		s.logger.ErrorContext(r.Context(), "health check", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": "unreachable", "version": s.cfg.Version})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "database": "ok", "version": s.cfg.Version})
}

// handleReadyz answers whether a load balancer should send this process
// traffic. Unlike /healthz (is the process alive), it turns 503 while the
// process starts and drains, so that it is taken out of rotation without
// being restarted.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	var reason string
	if s.cfg.Ready != nil {
		reason = s.cfg.Ready(r.Context())
	} else if err := s.reads.Ping(r.Context()); err != nil {
		s.logger.WarnContext(r.Context(), "not ready", "reason", NotReadyDatabase, "error", err)
		reason = NotReadyDatabase
	}
	w.Header().Set("Cache-Control", "no-store")
	if reason != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "reason": reason})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// handleNotFound answers what no route matched, in the API's error shape:
// 405 with Allow when the path exists for other methods, else 404.
func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != notFoundPattern {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, r, s.logger, apiError(codeMethodNotAllow, "", fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)))
		return
	}
	writeError(w, r, s.logger, core.Errorf(core.CodeNotFound, "", "no route %s %s", r.Method, r.URL.Path))
}
