package app

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
)

// The reputation guard (docs/deliverability.md, "The reputation guard"):
// per tenant, the rolling rates of complaints and permanent bounces over
// the bulk mail it handed off. A complaint or bounce recorded in a
// report's transaction is judged in that same transaction, so the pause
// takes effect with the event that crossed the threshold.

// Defaults of the guard's thresholds (--pause-complaint-rate,
// --pause-bounce-rate, --pause-min-sends).
const (
	DefaultPauseComplaintRate = 0.003
	DefaultPauseBounceRate    = 0.05
	DefaultPauseMinSends      = 500
	// ReputationWindow is how far back the rates look.
	ReputationWindow = 24 * time.Hour
)

// ReputationThresholds are the rates that pause a tenant's bulk stream,
// and the sends the window must hold before a rate counts.
type ReputationThresholds struct {
	// ComplaintRate pauses at complaints/sends ≥ it. Defaults to
	// DefaultPauseComplaintRate.
	ComplaintRate float64 `json:"complaint_rate"`
	// BounceRate pauses at permanent bounces/sends ≥ it. Defaults to
	// DefaultPauseBounceRate.
	BounceRate float64 `json:"bounce_rate"`
	// MinSends is the fewest sends in the window for a pause. Defaults to
	// DefaultPauseMinSends.
	MinSends int `json:"min_sends"`
}

func (r ReputationThresholds) withDefaults() ReputationThresholds {
	defaults.Set(&r.ComplaintRate, DefaultPauseComplaintRate)
	defaults.Set(&r.BounceRate, DefaultPauseBounceRate)
	defaults.Set(&r.MinSends, DefaultPauseMinSends)
	return r
}

// Reputation is a tenant's bulk stream as GET /v1/reputation answers it.
type Reputation struct {
	State         string               `json:"state"` // core.StreamActive or core.StreamPaused
	ComplaintRate float64              `json:"complaint_rate"`
	BounceRate    float64              `json:"bounce_rate"`
	WindowSends   int                  `json:"window_sends"`
	Thresholds    ReputationThresholds `json:"thresholds"`
	// Domains are the rates of each sending domain, when the tenant sent
	// bulk mail from several in the window (reputation_domains.go).
	Domains []DomainReputation `json:"domains,omitempty"`
}

// crosses reports whether counts reach a threshold with enough sends.
func (r ReputationThresholds) crosses(c core.StreamCounts) bool {
	if c.Sends < r.MinSends || c.Sends == 0 {
		return false
	}
	return rate(c.Complaints, c.Sends) >= r.ComplaintRate || rate(c.Bounces, c.Sends) >= r.BounceRate
}

func rate(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// windowStart is where the rates of a stream begin: the window's start,
// or the last resume when it is later (a resumed stream is judged on the
// mail handed off after the resume, not again on what paused it).
func windowStart(st *core.StreamState, now time.Time) time.Time {
	since := now.Add(-ReputationWindow)
	if st.JudgeFrom.After(since) {
		return st.JudgeFrom
	}
	return since
}

func (s *Service) reputationOf(st *core.StreamState, w windowCounts) *Reputation {
	c := w.total
	return &Reputation{State: st.State, ComplaintRate: rate(c.Complaints, c.Sends), BounceRate: rate(c.Bounces, c.Sends),
		WindowSends: c.Sends, Thresholds: s.cfg.Reputation.withDefaults(), Domains: w.domains()}
}

// Reputation returns the tenant's bulk stream: its state and its rates
// now.
func (s *Service) Reputation(ctx context.Context, tenant string) (*Reputation, error) {
	st, err := s.store.StreamState(ctx, tenant, core.StreamBulk)
	if err != nil {
		return nil, err
	}
	w, err := countWindow(ctx, s.store, core.StreamWindowParams{Tenant: tenant, Stream: core.StreamBulk, Since: windowStart(st, s.Now())})
	if err != nil {
		return nil, err
	}
	return s.reputationOf(st, w), nil
}

// guardOutcomes records the complaints and permanent bounces among a
// bulk send's recipient changes and, when one is new, judges the
// tenant's stream in the same transaction.
func (s *Service) guardOutcomes(ctx context.Context, tx core.Tx, send *core.Send, changes []RecipientChange, now time.Time) error {
	if send.Stream != core.StreamBulk {
		return nil
	}
	fresh := false
	for _, c := range changes {
		kind := ""
		switch {
		case c.Status == core.StatusComplained:
			kind = core.OutcomeComplaint
		case c.Event == core.EventBounced && c.Bounce != nil && c.Bounce.Type == core.BouncePermanent:
			kind = core.OutcomeBounce
		default:
			continue
		}
		first, err := tx.RecordStreamOutcome(ctx, core.StreamOutcome{Tenant: send.Tenant, Stream: core.StreamBulk, SendID: send.ID,
			Recipient: c.Address, Kind: kind, At: now})
		if err != nil {
			return err
		}
		fresh = fresh || first
	}
	if !fresh {
		return nil
	}
	return s.judgeStream(ctx, tx, send.Tenant, now)
}

// GuardHandoffBounces records, for the reputation guard, the recipients
// of a bulk send whose own servers refused it for good during the
// handoff (a 5xx to RCPT: the mx transport's commonest bounce), and
// judges the stream in the delivery's transaction, as a bounce report
// would be. Such a send, never accepted by a next hop, has no sent_at:
// the counts add it to the window's sends through its outcome
// (sqlstore's refusedSends), so the rate is over every send answered.
func (s *Service) GuardHandoffBounces(ctx context.Context, tx core.Tx, send *core.Send, refused []string, now time.Time) error {
	if len(refused) == 0 {
		return nil
	}
	changes := make([]RecipientChange, 0, len(refused))
	for _, a := range refused {
		changes = append(changes, RecipientChange{Address: core.NormalizeAddress(a), Status: core.StatusBounced,
			Event: core.EventBounced, Bounce: &core.Bounce{Type: core.BouncePermanent}})
	}
	return s.guardOutcomes(ctx, tx, send, changes, now)
}

// judgeStream pauses the tenant's bulk stream when its rates, or one of
// its sending domains', reach a threshold. The row lock comes first, so that the counts include every
// judgement committed before; SetStreamState's condition makes the pause,
// and its one stream.paused, a single decision across processes.
func (s *Service) judgeStream(ctx context.Context, tx core.Tx, tenant string, now time.Time) error {
	st, err := tx.LockStream(ctx, tenant, core.StreamBulk, now)
	if err != nil || st.State == core.StreamPaused {
		return err
	}
	w, err := countWindow(ctx, tx, core.StreamWindowParams{Tenant: tenant, Stream: core.StreamBulk, Since: windowStart(st, now)})
	if err != nil {
		return err
	}
	if !w.crosses(s.cfg.Reputation.withDefaults()) {
		return nil
	}
	changed, err := tx.SetStreamState(ctx, tenant, core.StreamBulk, core.StreamPaused, now)
	if err != nil || !changed {
		return err
	}
	st.State = core.StreamPaused
	return queueStreamEvent(ctx, tx, tenant, core.EventStreamPaused, s.reputationOf(st, w), now)
}

// ResumeStreamTx resumes the tenant's paused bulk stream in the caller's
// transaction (POST /v1/reputation/resume): its queued sends go again,
// and its rates start afresh from now. A stream that is not paused stays
// as it is (no event). It answers the stream after the resume.
func (s *Service) ResumeStreamTx(ctx context.Context, tx core.Tx, tenant string) (*Reputation, error) {
	now := s.Now()
	st, err := tx.LockStream(ctx, tenant, core.StreamBulk, now)
	if err != nil {
		return nil, err
	}
	changed, err := tx.SetStreamState(ctx, tenant, core.StreamBulk, core.StreamActive, now)
	if err != nil {
		return nil, err
	}
	if changed {
		st.State, st.JudgeFrom = core.StreamActive, now
	}
	w, err := countWindow(ctx, tx, core.StreamWindowParams{Tenant: tenant, Stream: core.StreamBulk, Since: windowStart(st, now)})
	if err != nil {
		return nil, err
	}
	rep := s.reputationOf(st, w)
	if changed {
		if err := queueStreamEvent(ctx, tx, tenant, core.EventStreamResumed, rep, now); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// streamPayload is the body of stream.paused and stream.resumed: the
// stream and its reputation at the change.
type streamPayload struct {
	Type      string     `json:"type"`
	CreatedAt string     `json:"created_at"`
	Data      streamData `json:"data"`
}

type streamData struct {
	Stream string `json:"stream"`
	*Reputation
}

func queueStreamEvent(ctx context.Context, tx core.Tx, tenant, event string, rep *Reputation, at time.Time) error {
	typ, _ := core.WebhookType(event)
	body, err := json.Marshal(streamPayload{Type: typ, CreatedAt: at.Format("2006-01-02T15:04:05.000000Z07:00"),
		Data: streamData{Stream: string(core.StreamBulk), Reputation: rep}})
	if err != nil {
		return fmt.Errorf("%s payload: %w", typ, err)
	}
	// The subject is the stream, as a mailbox event's is its mailbox.
	return tx.QueueTenantWebhook(ctx, tenant, event, NewID("evt_"), string(core.StreamBulk), body, at)
}

// MaxGuardedTenants bounds the tenants GuardedReputations reads (the
// metrics read it at every scrape).
const MaxGuardedTenants = 1000

// TenantReputation is one judged tenant's bulk stream.
type TenantReputation struct {
	Tenant string
	Reputation
}

// GuardedReputations returns the reputation of each tenant the guard has
// judged (one with a complaint or permanent bounce of bulk mail), up to
// MaxGuardedTenants.
func (s *Service) GuardedReputations(ctx context.Context) ([]TenantReputation, error) {
	sts, err := s.store.GuardedStreams(ctx, MaxGuardedTenants)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	out := make([]TenantReputation, 0, len(sts))
	for _, st := range sts {
		if st.Stream != core.StreamBulk {
			continue
		}
		c, err := s.store.StreamCounts(ctx, core.StreamWindowParams{Tenant: st.Tenant, Stream: st.Stream, Since: windowStart(st, now)})
		if err != nil {
			return nil, err
		}
		out = append(out, TenantReputation{Tenant: st.Tenant, Reputation: *s.reputationOf(st, windowCounts{total: c})})
	}
	return out, nil
}
