// Package metrics defines sendonce's Prometheus metrics on a registry of its
// own, so tests and several servers in one process never share counters.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds every sendonce metric.
type Metrics struct {
	Registry             *prometheus.Registry
	SendsAccepted        prometheus.Counter
	IdempotentReplays    prometheus.Counter
	IdempotencyConflicts *prometheus.CounterVec // reason: in_use | reused
	DeliveryAttempts     *prometheus.CounterVec // outcome: sent | tempfail | permfail | unknown
	// DestinationThrottles counts the replies that made an mx destination
	// slow down, by the shaping action taken (connections | rate | pause).
	DestinationThrottles *prometheus.CounterVec // action
	// DestinationResumes counts mx destinations back at their full limits
	// after a slow-down.
	DestinationResumes prometheus.Counter
	HTTPRequests       *prometheus.CounterVec // code
	// DuplicatesPrevented counts repeated sends that sent nothing new, by
	// how they were caught (DuplicateVias); the dashboard's overview
	// prices them.
	DuplicatesPrevented *prometheus.CounterVec // via
	status              statusCounters
	vias                boundVias
	// GroupCommitSize observes how many write transactions each commit
	// carried (a batch of the group commit, on either database).
	GroupCommitSize prometheus.Histogram
	// SMTP submission (docs/smtp.md): sessions opened, sessions open now,
	// messages answered 250 (outcome: accepted | replayed) and replies
	// refusing a command or a message, by SMTP code.
	SMTPSessions     prometheus.Counter
	SMTPSessionsOpen prometheus.Gauge
	SMTPMessages     *prometheus.CounterVec
	SMTPRejections   *prometheus.CounterVec
}

// Ways a duplicate send is caught: a replayed response (the same
// Idempotency-Key again), a 409 (the same key while the first request
// runs) and an SMTP resubmission answered with the first acceptance (its
// 451 while the first runs is not counted: the client retries and its
// retry is the replay). An MCP send_email that finds its intent's send answers in the
// MCP process, which has no metrics of its own yet.
const (
	ViaReplay   = "replay"
	ViaConflict = "conflict"
	ViaSMTP     = "smtp"
	// ViaMCP: the MCP server found the send of an agent's intent before
	// sending (its lookup carries the intent header).
	ViaMCP = "mcp"
)

// DuplicateVias lists the via labels of DuplicatesPrevented.
var DuplicateVias = []string{ViaReplay, ViaConflict, ViaSMTP, ViaMCP}

// New registers the metrics. queueDepth is read at every scrape.
func New(queueDepth func(ctx context.Context) (int, error)) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		SendsAccepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sendonce_sends_accepted_total", Help: "Sends accepted (first requests only, not replays).",
		}),
		IdempotentReplays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sendonce_idempotent_replays_total", Help: "Responses replayed for a repeated Idempotency-Key.",
		}),
		IdempotencyConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sendonce_idempotency_conflicts_total", Help: "Requests refused for their Idempotency-Key.",
		}, []string{"reason"}),
		DeliveryAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sendonce_delivery_attempts_total", Help: "Delivery attempts by outcome.",
		}, []string{"outcome"}),
		DestinationThrottles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sendonce_destination_throttles_total", Help: "Replies that made an mx destination slow down, by the action taken.",
		}, []string{"action"}),
		DestinationResumes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sendonce_destination_resumes_total", Help: "Times an mx destination came back to its full limits after slowing down.",
		}),
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sendonce_http_requests_total", Help: "HTTP requests by status code.",
		}, []string{"code"}),
		DuplicatesPrevented: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sendonce_duplicates_prevented_total", Help: "Repeated send requests that sent nothing new, by how they were caught.",
		}, []string{"via"}),
		GroupCommitSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sendonce_db_group_commit_size", Help: "Write transactions that shared one commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}),
		SMTPSessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sendonce_smtp_sessions_total", Help: "SMTP submission sessions opened.",
		}),
		SMTPSessionsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sendonce_smtp_sessions_open", Help: "SMTP submission sessions open now.",
		}),
		SMTPMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sendonce_smtp_messages_total", Help: "SMTP messages answered 250, by outcome (accepted, replayed).",
		}, []string{"outcome"}),
		SMTPRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sendonce_smtp_rejections_total", Help: "SMTP commands and messages refused, by reply code.",
		}, []string{"code"}),
	}
	for _, o := range []string{"accepted", "replayed"} {
		m.SMTPMessages.WithLabelValues(o)
	}
	for _, r := range []string{"in_use", "reused"} {
		m.IdempotencyConflicts.WithLabelValues(r)
	}
	for _, o := range []string{"sent", "tempfail", "permfail", "unknown"} {
		m.DeliveryAttempts.WithLabelValues(o)
	}
	for _, v := range DuplicateVias {
		m.DuplicatesPrevented.WithLabelValues(v)
	}
	reg.MustRegister(m.SendsAccepted, m.IdempotentReplays, m.IdempotencyConflicts, m.DeliveryAttempts, m.HTTPRequests, m.GroupCommitSize,
		m.SMTPSessions, m.SMTPSessionsOpen, m.SMTPMessages, m.SMTPRejections,
		m.DuplicatesPrevented, m.DestinationThrottles, m.DestinationResumes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if queueDepth != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sendonce_queue_depth", Help: "Sends queued or in a delivery attempt.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := queueDepth(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// RegisterPool exposes a pgx pool's figures, read at every scrape, labelled
// with the pool's name (the store keeps a write and a read pool).
func RegisterPool(reg *prometheus.Registry, name string, stat func() *pgxpool.Stat) {
	labels := prometheus.Labels{"pool": name}
	gauge := func(metric, help string, v func(s *pgxpool.Stat) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metric, Help: help, ConstLabels: labels},
			func() float64 { return v(stat()) }))
	}
	gauge("sendonce_db_pool_max_conns", "Connections the pool may open.", func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) })
	gauge("sendonce_db_pool_total_conns", "Connections open now.", func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) })
	gauge("sendonce_db_pool_acquired_conns", "Connections in use now.", func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) })
	gauge("sendonce_db_pool_idle_conns", "Idle connections now.", func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) })
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "sendonce_db_pool_acquire_wait_seconds_total", Help: "Time spent waiting for a connection.", ConstLabels: labels,
	}, func() float64 { return stat().AcquireDuration().Seconds() }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "sendonce_db_pool_empty_acquire_total", Help: "Acquires that had to wait for a connection.", ConstLabels: labels,
	}, func() float64 { return float64(stat().EmptyAcquireCount()) }))
}
