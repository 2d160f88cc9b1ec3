package app

import (
	"context"
	"net/mail"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// The guard per sending domain: a tenant that sends bulk mail from more
// than one domain is judged on each domain's rates too, so that one bad
// list behind one domain pauses the stream even while the tenant's other
// domains keep its overall rates low (receivers judge a domain's mail by
// that domain's complaints).

// DomainReputation is one sending domain's rates in a tenant's window.
type DomainReputation struct {
	Domain        string  `json:"domain"`
	ComplaintRate float64 `json:"complaint_rate"`
	BounceRate    float64 `json:"bounce_rate"`
	WindowSends   int     `json:"window_sends"`
}

// domainCounts is one sending domain's counts.
type domainCounts struct {
	domain string
	core.StreamCounts
}

// windowCounts are a stream's counts in its window: the tenant's, and per
// sending domain when the store told them apart (nil otherwise).
type windowCounts struct {
	total    core.StreamCounts
	byDomain []domainCounts
}

// streamReads is what counting a window needs: the store's reads or the
// transaction's.
type streamReads interface {
	StreamCounts(ctx context.Context, p core.StreamWindowParams) (core.StreamCounts, error)
	StreamSenderCounts(ctx context.Context, p core.StreamWindowParams) ([]core.SenderCounts, error)
}

// countWindow counts the window of p through r: per From address summed
// by domain, or, past the addresses a store tells apart, the tenant's
// totals alone.
func countWindow(ctx context.Context, r streamReads, p core.StreamWindowParams) (windowCounts, error) {
	senders, err := r.StreamSenderCounts(ctx, p)
	if err != nil {
		return windowCounts{}, err
	}
	if senders == nil {
		total, err := r.StreamCounts(ctx, p)
		return windowCounts{total: total}, err
	}
	var w windowCounts
	at := map[string]int{}
	for _, s := range senders {
		d := fromDomain(s.From)
		i, ok := at[d]
		if !ok {
			i = len(w.byDomain)
			at[d] = i
			w.byDomain = append(w.byDomain, domainCounts{domain: d})
		}
		add(&w.byDomain[i].StreamCounts, s.StreamCounts)
		add(&w.total, s.StreamCounts)
	}
	slices.SortFunc(w.byDomain, func(a, b domainCounts) int { return strings.Compare(a.domain, b.domain) })
	return w, nil
}

func add(to *core.StreamCounts, c core.StreamCounts) {
	to.Sends += c.Sends
	to.Complaints += c.Complaints
	to.Bounces += c.Bounces
}

// fromDomain is the domain of a send's rendered From, lower-cased.
func fromDomain(rendered string) string {
	addr := rendered
	if a, err := mail.ParseAddress(rendered); err == nil {
		addr = a.Address
	}
	addr = strings.TrimSuffix(addr, ">")
	return strings.ToLower(addr[strings.LastIndexByte(addr, '@')+1:])
}

// crosses reports whether the tenant's rates, or one sending domain's,
// reach a threshold with enough sends.
func (w windowCounts) crosses(th ReputationThresholds) bool {
	if th.crosses(w.total) {
		return true
	}
	return len(w.byDomain) > 1 && slices.ContainsFunc(w.byDomain, func(d domainCounts) bool { return th.crosses(d.StreamCounts) })
}

// domains are the per-domain rates a reputation shows: only where they
// differ from the tenant's, that is when it sent from several domains.
func (w windowCounts) domains() []DomainReputation {
	if len(w.byDomain) < 2 {
		return nil
	}
	out := make([]DomainReputation, 0, len(w.byDomain))
	for _, d := range w.byDomain {
		out = append(out, DomainReputation{Domain: d.domain, ComplaintRate: rate(d.Complaints, d.Sends),
			BounceRate: rate(d.Bounces, d.Sends), WindowSends: d.Sends})
	}
	return out
}
