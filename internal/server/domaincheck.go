package server

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/lifecycle"
)

// DefaultDomainCheckInterval is how often a worker re-checks the domains
// that wait for DNS (--domain-check-interval).
const DefaultDomainCheckInterval = time.Hour

// DomainCheckJitter is the fraction of the interval each wait is moved by
// at random, either way: several workers started together do not query
// DNS in step.
const DomainCheckJitter = 0.2

// domainChecker is the periodic domain check of a worker process: a
// round of app.CheckDueDomains every interval (jittered), through the
// service's one DNS resolver setting. It is a lifecycle.Service.
type domainChecker struct {
	svc      *app.Service
	interval time.Duration
	logger   *slog.Logger
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// newDomainChecker is nil where delivery does not run (role api): the
// workers check, once per deployment's worker.
func newDomainChecker(svc *app.Service, cfg Config, logger *slog.Logger) *domainChecker {
	if !cfg.Work {
		return nil
	}
	interval := cfg.DomainCheckInterval
	defaults.Set(&interval, DefaultDomainCheckInterval)
	return &domainChecker{svc: svc, interval: interval, logger: logger}
}

// Start runs rounds until Stop; the first after one jittered interval.
func (c *domainChecker) Start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			if !lifecycle.Sleep(ctx, jittered(c.interval)) {
				return
			}
			n, err := c.svc.CheckDueDomains(ctx)
			if err != nil && ctx.Err() == nil {
				c.logger.WarnContext(ctx, "periodic domain check", slog.Int("checked", n), slog.Any("error", err))
			}
		}
	}()
	return nil
}

// Stop ends the loop, cancelling a round in progress, and waits for it
// within ctx.
func (c *domainChecker) Stop(ctx context.Context) error {
	if c.cancel == nil {
		return nil
	}
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// jittered is d moved by up to DomainCheckJitter of itself either way.
func jittered(d time.Duration) time.Duration {
	f := 1 + DomainCheckJitter*(2*rand.Float64()-1)
	return time.Duration(float64(d) * f)
}
