package app

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// ReputationPoint is the tenant's bulk stream at one hour: the rolling
// 24 h rates as the guard measures them, ending at At.
type ReputationPoint struct {
	At                        time.Time
	Sends                     int
	ComplaintRate, BounceRate float64
}

// ReputationSeries returns the rolling 24 h rates of the tenant's bulk
// stream at the end of each of the last hours hours, oldest first (the
// dashboard's chart). It reads hours+24 hourly buckets once and sums
// each point's 24. It ignores resumes: the chart shows what the mail
// did, the state says what the guard decided.
func (s *Service) ReputationSeries(ctx context.Context, tenant string, hours int) ([]ReputationPoint, error) {
	if hours < 1 || hours > 24*14 {
		return nil, core.Errorf(core.CodeValidation, "hours", "a series is 1 to %d hours", 24*14)
	}
	const window = int(ReputationWindow / time.Hour)
	end := s.Now().Truncate(time.Hour).Add(time.Hour) // the end of the current hour
	since := end.Add(-time.Duration(hours+window) * time.Hour)
	buckets, err := s.store.StreamSeries(ctx, core.StreamWindowParams{Tenant: tenant, Stream: core.StreamBulk, Since: since}, time.Hour)
	if err != nil {
		return nil, err
	}
	per := make([]core.StreamCounts, hours+window)
	for _, b := range buckets {
		if i := int(b.Start.Sub(since) / time.Hour); i >= 0 && i < len(per) {
			per[i] = b.StreamCounts
		}
	}
	out := make([]ReputationPoint, 0, hours)
	var sum core.StreamCounts
	for i, c := range per {
		sum.Sends, sum.Complaints, sum.Bounces = sum.Sends+c.Sends, sum.Complaints+c.Complaints, sum.Bounces+c.Bounces
		if i >= window {
			old := per[i-window]
			sum.Sends, sum.Complaints, sum.Bounces = sum.Sends-old.Sends, sum.Complaints-old.Complaints, sum.Bounces-old.Bounces
		}
		if i >= window { // the last hours buckets: each sum is a full window
			out = append(out, ReputationPoint{At: since.Add(time.Duration(i+1) * time.Hour), Sends: sum.Sends,
				ComplaintRate: rate(sum.Complaints, sum.Sends), BounceRate: rate(sum.Bounces, sum.Sends)})
		}
	}
	return out, nil
}
