package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/leasequeue"
	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/webhooksig"
)

// DefaultSchedule is --webhook-retry-schedule's default: the waits after
// the first, second, … failed attempt; after the last the delivery is
// failed (eight attempts over about 28 hours).
const DefaultSchedule = "5s,5m,30m,2h,5h,10h,10h"

// ParseSchedule reads a retry schedule: comma-separated positive
// durations.
func ParseSchedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("retry schedule %q: %q is not a positive duration", s, part)
		}
		out = append(out, d)
	}
	return out, nil
}

// MaxConsecutiveFailures is how many deliveries in a row (each having
// used up the whole retry schedule) fail before sendonce disables their
// endpoint.
const MaxConsecutiveFailures = 10

// Timeout bounds one attempt: a 2xx must come within it.
const Timeout = 10 * time.Second

// MaxResponse is how much of a failed attempt's response body is kept:
// enough for an endpoint's error message, too little to store (and show)
// whatever page an endpoint answers with. A 2xx's body is not kept.
const MaxResponse = 256

// WorkerConfig configures a Worker; zero values take the defaults.
type WorkerConfig struct {
	// Schedule is the retry schedule. Defaults to DefaultSchedule.
	Schedule []time.Duration
	// Concurrency bounds the attempts running at once in this process.
	// Defaults to 32.
	Concurrency int
	// PerEndpoint bounds the attempts running at once to one endpoint,
	// across processes. Defaults to 4.
	PerEndpoint int
	// PerTenant bounds the attempts running at once to one tenant's
	// endpoints, across processes. Defaults to half of Concurrency, so
	// that a tenant's slow endpoints leave the other half to the rest.
	PerTenant int
	// MaxFailures: see MaxConsecutiveFailures, the default.
	MaxFailures int
	// Timeout defaults to Timeout (the contract's 10 s).
	Timeout time.Duration
	// Lease is how long a claimed attempt is held before another worker
	// may take it again. Defaults to 3 × Timeout.
	Lease time.Duration
	// Poll is how often an idle worker looks for due deliveries. Defaults
	// to 500ms.
	Poll time.Duration
	// Policy judges every address connected to (netpolicy.Policy, with
	// "private" added under --webhook-allow-private).
	Policy *netpolicy.Policy
	// SecretKey opens sealed signing secrets.
	SecretKey string
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// TracerProvider takes the deliveries' spans (internal/tracing), each
	// in the trace of its event's send when that send kept one. Defaults
	// to none: no span is made.
	TracerProvider trace.TracerProvider
}

func (c *WorkerConfig) defaults() {
	if len(c.Schedule) == 0 {
		c.Schedule, _ = ParseSchedule(DefaultSchedule)
	}
	defaults.Set(&c.Concurrency, 32)
	defaults.Set(&c.PerEndpoint, 4)
	defaults.Set(&c.PerTenant, max(c.Concurrency/2, c.PerEndpoint))
	defaults.Set(&c.MaxFailures, MaxConsecutiveFailures)
	defaults.Set(&c.Timeout, Timeout)
	defaults.Set(&c.Lease, 3*c.Timeout)
	defaults.Set(&c.Poll, 500*time.Millisecond)
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Worker claims due deliveries and makes their attempts.
type Worker struct {
	q      core.WebhookQueue
	cfg    WorkerConfig
	client *http.Client
	logger *slog.Logger

	// runner claims due deliveries as workers free up (the one
	// lease-queue runner, internal/leasequeue).
	runner *leasequeue.Runner[*core.WebhookJob]
	tracer tracing.Tracer
}

// NewWorker returns a worker on q.
func NewWorker(q core.WebhookQueue, cfg WorkerConfig, logger *slog.Logger) *Worker {
	cfg.defaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tr := cfg.Policy.HTTPTransport()
	tr.MaxIdleConnsPerHost = cfg.PerEndpoint
	w := &Worker{q: q, cfg: cfg, logger: logger,
		client: &http.Client{
			Transport: tr,
			Timeout:   cfg.Timeout,
			// Redirects are not followed: the endpoint registered is the
			// one that gets the event, and a 3xx is a failed attempt.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		tracer: tracing.New(cfg.TracerProvider, "github.com/sendonce/sendonce/internal/webhook")}
	w.runner = leasequeue.New(leasequeue.Config[*core.WebhookJob]{Name: "webhook deliveries", Workers: cfg.Concurrency, Poll: cfg.Poll,
		Claim: func(ctx context.Context, n int) ([]*core.WebhookJob, bool, error) {
			jobs, err := w.claim(ctx, n)
			return jobs, false, err
		},
		Work: w.Attempt, Logger: logger})
	return w
}

// Notify makes the worker look for due deliveries now. It never blocks.
func (w *Worker) Notify() { w.runner.Notify() }

// Start runs the claim loop until Stop.
func (w *Worker) Start() { w.runner.Start() }

// Stop stops claiming and waits for running attempts (bounded by ctx,
// after which they are canceled; their deliveries are tried again once
// their lease ends).
func (w *Worker) Stop(ctx context.Context) error { return w.runner.Stop(ctx) }

func (w *Worker) claim(ctx context.Context, n int) ([]*core.WebhookJob, error) {
	now := w.cfg.Now().UTC()
	return w.q.ClaimWebhooks(ctx, core.WebhookClaim{Now: now, LeaseUntil: now.Add(w.cfg.Lease), Token: idempotency.NewToken(),
		Limit: n, PerEndpoint: w.cfg.PerEndpoint, PerTenant: w.cfg.PerTenant, Build: Build, TraceParents: w.tracer.Enabled()})
}

// RunOnce claims the deliveries due now and attempts them one after the
// other; it returns how many. Tests and tools drive delivery with it.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	jobs, err := w.claim(ctx, 100)
	for _, j := range jobs {
		w.Attempt(ctx, j)
	}
	return len(jobs), err
}

// Attempt makes one attempt of a claimed delivery and records it. With
// tracing on it is the delivery's span: a child of the span that accepted
// the event's send, else the root of a trace of its own.
func (w *Worker) Attempt(ctx context.Context, j *core.WebhookJob) {
	if !w.tracer.Enabled() {
		w.attempt(ctx, j)
		return
	}
	d := j.Delivery
	ctx, span := w.tracer.Start(tracing.WithParent(ctx, d.TraceParent), "sendonce.webhook.delivery", trace.SpanKindClient)
	if span.IsRecording() {
		span.SetAttributes(tracing.Tenant.String(d.Tenant), tracing.SendID.String(d.SendID), tracing.Webhook.String(d.WebhookID),
			tracing.Event.String(d.EventID), tracing.Attempt.Int(d.Tries))
	}
	r, recorded := w.attempt(ctx, j)
	outcome := "delivered"
	switch {
	case !recorded:
		outcome = "unrecorded"
	case !r.Success && r.NextAttemptAt != nil:
		outcome = "retry"
	case !r.Success:
		outcome = "failed"
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("http.response.status_code", r.Attempt.HTTPStatus))
	}
	tracing.End(span, !r.Success || !recorded, outcome)
}

// attempt is Attempt's work: the result, and whether it was recorded.
func (w *Worker) attempt(ctx context.Context, j *core.WebhookJob) (core.WebhookResult, bool) {
	d := j.Delivery
	start := w.cfg.Now()
	a := core.WebhookAttempt{WebhookID: d.WebhookID, EventID: d.EventID, At: start.UTC()}
	status, resp, err := w.post(ctx, j, start)
	a.Duration = w.cfg.Now().Sub(start)
	a.HTTPStatus, a.Response = status, resp
	if err != nil {
		a.Error = attemptError(err)
		w.logger.LogAttrs(ctx, slog.LevelInfo, "webhook attempt failed", slog.String("webhook_id", d.WebhookID),
			slog.String("event_id", d.EventID), slog.Any("error", err))
	}
	r := core.WebhookResult{Job: j, Attempt: a, Now: w.cfg.Now().UTC(), MaxFailures: w.cfg.MaxFailures,
		Success: err == nil && status >= 200 && status < 300}
	if status == http.StatusGone {
		r.Disable = "the endpoint answered 410 Gone"
	}
	if !r.Success && d.Tries <= len(w.cfg.Schedule) {
		at := r.Now.Add(w.cfg.Schedule[d.Tries-1])
		r.NextAttemptAt = &at
	}
	// Written even when ctx ended: the attempt happened.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Timeout)
	defer cancel()
	if err := w.q.RecordWebhookAttempt(rctx, r); err != nil {
		// The delivery stays attempting: once its lease ends it is tried
		// again (at least once).
		w.logger.ErrorContext(ctx, "record webhook attempt", slog.String("webhook_id", d.WebhookID),
			slog.String("event_id", d.EventID), slog.Any("error", err))
		return r, false
	}
	w.logger.LogAttrs(ctx, slog.LevelDebug, "webhook attempt", slog.String("webhook_id", d.WebhookID),
		slog.String("event_id", d.EventID), slog.Int("try", d.Tries), slog.Int("http_status", status), slog.Bool("ok", r.Success))
	return r, true
}

// post sends the delivery's kept body, signed now. It returns the HTTP
// status (0 without a response) and the start of the response body.
func (w *Worker) post(ctx context.Context, j *core.WebhookJob, now time.Time) (int, string, error) {
	secret, err := OpenSecret(j.Secret, w.cfg.SecretKey)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.Endpoint, bytes.NewReader(j.Delivery.Body))
	if err != nil {
		return 0, "", fmt.Errorf("webhook request: %w", err)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return 0, "", errors.New("webhook endpoint is not http(s)")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sendonce-webhooks")
	if err := webhooksig.SetHeaders(req.Header, secret, j.Delivery.EventID, now, j.Delivery.Body); err != nil {
		return 0, "", err
	}
	res, err := w.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	var b []byte
	if res.StatusCode < 200 || res.StatusCode >= 300 {
		b, _ = io.ReadAll(io.LimitReader(res.Body, MaxResponse))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // let the connection be reused
	return res.StatusCode, strings.ToValidUTF8(string(b), ""), nil
}

// attemptError is what an attempt's record says of a failure: a class,
// never the error's text, which names resolvers and internal addresses to
// whoever reads the endpoint's attempts (the log has the whole error).
func attemptError(err error) string {
	var dnsErr *net.DNSError
	var blocked *netpolicy.BlockedError
	var certErr *tls.CertificateVerificationError
	var opErr *net.OpError
	switch {
	case errors.As(err, &blocked) || errors.Is(err, netpolicy.ErrBlocked):
		return "the endpoint's address is not one sendonce may connect to"
	case errors.As(err, &dnsErr):
		return "the endpoint's host name did not resolve"
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		return "no answer within the timeout"
	case errors.As(err, &certErr):
		return "the endpoint's TLS certificate was not accepted"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused"
	case errors.As(err, &opErr):
		return "the connection failed"
	}
	return "the request failed"
}
