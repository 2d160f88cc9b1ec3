package app

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/dnscheck"
)

// Reads of the stored DMARC reports, for the API and the dashboard; all
// within the key's tenant.

// Bounds of the DMARC reads.
const (
	DefaultDMARCDays  = 7
	MaxDMARCDays      = 366
	maxDMARCSources   = 500
	DefaultDMARCLimit = 50
	MaxDMARCLimit     = 100
)

// ListDMARCReports lists the tenant's reports, newest first; domain ""
// for all, before the last id of the previous page.
func (s *Service) ListDMARCReports(ctx context.Context, key *core.APIKey, domain, before string, limit int) ([]*core.DMARCReport, error) {
	defaults.Set(&limit, DefaultDMARCLimit)
	if limit > MaxDMARCLimit {
		return nil, core.Errorf(core.CodeValidation, "limit", "limit is at most %d", MaxDMARCLimit)
	}
	return s.store.ListDMARCReports(ctx, core.DMARCReportFilter{Tenant: key.Tenant, Domain: strings.ToLower(domain),
		Before: before, Limit: limit})
}

// DMARCReport is one of the tenant's reports with its records;
// core.ErrNotFound for another tenant's.
func (s *Service) DMARCReport(ctx context.Context, key *core.APIKey, id string) (*core.DMARCReport, error) {
	return s.store.DMARCReport(ctx, key.Tenant, id)
}

// DMARCSource is one source IP of a summary, and whether it is one of
// sendonce's own egress sources (--egress-source).
type DMARCSource struct {
	core.DMARCSource
	Own bool
}

// DMARCSummary is a domain's last Days days: per source IP, and per day.
type DMARCSummary struct {
	Domain               string
	Days                 int
	Since                time.Time
	Messages, Pass, Fail int64
	Sources              []DMARCSource
	Daily                []core.DMARCDay
}

// DMARCSummary totals the domain's reports whose period ends in the last
// days days (counted back from now; 0 means DefaultDMARCDays).
func (s *Service) DMARCSummary(ctx context.Context, key *core.APIKey, domain string, days int) (*DMARCSummary, error) {
	domain = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(domain)), ".")
	if domain == "" {
		return nil, core.Errorf(core.CodeValidation, "domain", "domain is required")
	}
	if days == 0 {
		days = DefaultDMARCDays
	}
	if days < 1 || days > MaxDMARCDays {
		return nil, core.Errorf(core.CodeValidation, "days", "days is 1 to %d", MaxDMARCDays)
	}
	since := s.Now().UTC().Add(-time.Duration(days) * 24 * time.Hour)
	srcs, err := s.store.DMARCSources(ctx, key.Tenant, domain, since, maxDMARCSources)
	if err != nil {
		return nil, err
	}
	daily, err := s.store.DMARCDays(ctx, key.Tenant, domain, since)
	if err != nil {
		return nil, err
	}
	out := &DMARCSummary{Domain: domain, Days: days, Since: since, Sources: []DMARCSource{}, Daily: daily}
	for _, src := range srcs {
		out.Sources = append(out.Sources, DMARCSource{DMARCSource: src, Own: s.ownSource(src.SourceIP)})
	}
	for _, d := range daily {
		out.Pass += d.Pass
		out.Fail += d.Fail
	}
	out.Messages = out.Pass + out.Fail
	return out, nil
}

// ownSource: ip is one of the mx transport's egress sources.
func (s *Service) ownSource(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(s.cfg.Egress, func(e dnscheck.Egress) bool { return e.IP.Unmap() == a.Unmap() })
}
