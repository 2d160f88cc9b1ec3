package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TenantReputation is one tenant's bulk stream as the reputation guard
// judges it (docs/deliverability.md, "The reputation guard").
type TenantReputation struct {
	Tenant                    string
	ComplaintRate, BounceRate float64
	Paused                    bool
}

// reputationCollector reads the tenants' reputations at every scrape: the
// rates roll with the window, so a value kept since the last report
// would be stale.
type reputationCollector struct {
	read                       func(ctx context.Context) ([]TenantReputation, error)
	logger                     *slog.Logger
	complaints, bounces, pause *prometheus.Desc
}

// RegisterReputation exposes per tenant the gauges
// sendonce_reputation_complaint_rate, sendonce_reputation_bounce_rate
// and sendonce_reputation_paused (1 paused, 0 active), read with read at
// every scrape.
func (m *Metrics) RegisterReputation(read func(ctx context.Context) ([]TenantReputation, error), logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m.Registry.MustRegister(&reputationCollector{read: read, logger: logger,
		complaints: prometheus.NewDesc("sendonce_reputation_complaint_rate",
			"Complaints per bulk send handed off in the reputation guard's window, per tenant.", []string{"tenant"}, nil),
		bounces: prometheus.NewDesc("sendonce_reputation_bounce_rate",
			"Permanent bounces per bulk send handed off in the reputation guard's window, per tenant.", []string{"tenant"}, nil),
		pause: prometheus.NewDesc("sendonce_reputation_paused",
			"Whether the tenant's bulk stream is paused by the reputation guard (1) or active (0).", []string{"tenant"}, nil),
	})
}

func (c *reputationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.complaints
	ch <- c.bounces
	ch <- c.pause
}

func (c *reputationCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	reps, err := c.read(ctx)
	if err != nil {
		c.logger.Warn("reputation gauges not read", "err", err)
		return
	}
	for _, r := range reps {
		paused := 0.0
		if r.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.complaints, prometheus.GaugeValue, r.ComplaintRate, r.Tenant)
		ch <- prometheus.MustNewConstMetric(c.bounces, prometheus.GaugeValue, r.BounceRate, r.Tenant)
		ch <- prometheus.MustNewConstMetric(c.pause, prometheus.GaugeValue, paused, r.Tenant)
	}
}
