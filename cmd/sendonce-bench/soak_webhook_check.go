package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/sendonce/sendonce/internal/lifecycle"
)

// hookDelivery is one event's delivery to the endpoint as the API lists
// it.
type hookDelivery struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	EmailID  string `json:"email_id"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
}

// deliveries lists every delivery of the endpoint (every page).
func (l *hookLeg) deliveries(ctx context.Context, api *soakAPI) ([]hookDelivery, error) {
	l.mu.Lock()
	id := l.id
	l.mu.Unlock()
	if id == "" {
		return nil, errHookNotMade
	}
	var all []hookDelivery
	for after, pages := "", 0; pages < 10000; pages++ {
		var page struct {
			Data    []hookDelivery `json:"data"`
			HasMore bool           `json:"has_more"`
			Next    *string        `json:"next"`
		}
		if err := api.getRetrying(ctx, "/v1/webhooks/"+id+"/events?limit=100&after="+url.QueryEscape(after), &page); err != nil {
			return nil, fmt.Errorf("soak webhooks: list: %w", err)
		}
		all = append(all, page.Data...)
		if !page.HasMore || page.Next == nil || *page.Next == "" {
			break
		}
		after = *page.Next
	}
	return all, nil
}

// undrained counts the deliveries not yet succeeded and answered 2xx by
// the endpoint.
func (l *hookLeg) undrained(ds []hookDelivery) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, d := range ds {
		if s := l.seen[d.ID]; d.Status != "success" || s == nil || s.acked == 0 {
			n++
		}
	}
	return n
}

// hookStall is how long the backlog may stay the same size before the
// check stops waiting for it: longer than the soak's retry waits
// (hookSchedule) and a killed worker's lease (30 s), so a backlog that
// does not shrink for that long is stuck, not waiting.
const hookStall = 60 * time.Second

// judge waits for the endpoint's deliveries to finish — a failed attempt
// waits for its retry, one cut short by a killed worker for its lease —
// then checks them into rep. It waits drain, and past drain as long as
// the backlog keeps shrinking (the endpoint takes PerEndpoint attempts at
// once, so a slow phase leaves a backlog that is late, not lost), up to
// hookDrainMax. Deliveries still pending when it stops are lost if the
// backlog had stalled (hookStall), and only a backlog if it was still
// shrinking at the bound.
func (l *hookLeg) judge(ctx context.Context, api *soakAPI, drain time.Duration, rep *soakReport, logger *slog.Logger) error {
	start := time.Now()
	var ds []hookDelivery
	last, progressed, stalled := -1, start, false
	for {
		var err error
		if ds, err = l.deliveries(ctx, api); err != nil {
			return err
		}
		n := l.undrained(ds)
		if n == 0 {
			break
		}
		if last < 0 || n < last {
			last, progressed = n, time.Now()
		}
		if time.Since(start) > drain {
			stalled = time.Since(progressed) > hookStall
			if stalled || time.Since(start) > hookDrainMax {
				logger.Warn("webhook deliveries not drained; checking anyway", slog.Int("undrained", n),
					slog.Bool("stalled", stalled), slog.Duration("waited", time.Since(start).Round(time.Second)))
				break
			}
		}
		if !lifecycle.Sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	judgeHooks(ds, l.seen, l.byBody, l.badSig, !stalled, rep)
	for k, v := range l.answered {
		rep.Webhooks.Answered[k] += v
	}
	rep.Webhooks.DrainSeconds = int(time.Since(start).Seconds())
	logger.Info("webhook leg judged", slog.Int("events", len(ds)), slog.Int("seen", len(l.seen)))
	return nil
}

// hookDrainMax bounds the wait for a backlog that keeps shrinking.
const hookDrainMax = 15 * time.Minute

// judgeHooks checks the endpoint's record against the database's
// deliveries: each delivered (answered 2xx) at least once and marked
// success; each webhook-id with one body, of the type and send the
// database gives it; each body under one webhook-id; no attempt without
// a good signature; nothing at the endpoint the database does not hold.
// With backlog (the wait ended while the backlog still shrank), a pending
// delivery is not lost: Backlog when not yet answered 2xx, delivered when
// answered.
func judgeHooks(ds []hookDelivery, seen map[string]*hookSeen, byBody map[[32]byte]map[string]bool, badSig int, backlog bool, rep *soakReport) {
	w := &rep.Webhooks
	if w.Answered == nil {
		w.Answered = map[string]int{}
	}
	w.Events = len(ds)
	inDB := map[string]bool{}
	finding := func(kind string, n *int, what string) {
		*n++
		if len(rep.Findings) < maxFindings {
			rep.Findings = append(rep.Findings, "webhook "+kind+": "+what)
		}
	}
	for _, d := range ds {
		inDB[d.ID] = true
		s := seen[d.ID]
		what := fmt.Sprintf("%s %s of %s, %s after %d attempts", d.ID, d.Type, d.EmailID, d.Status, d.Attempts)
		switch {
		case backlog && d.Status == "pending" && (s == nil || s.acked == 0):
			w.Backlog++ // still in the shrinking backlog
			continue
		case s == nil || s.acked == 0:
			finding("not delivered", &rep.WebhookLost, what)
			continue
		case d.Status != "success" && !(backlog && d.Status == "pending"):
			// (While the backlog drains, a 2xx may be in flight to the
			// database.)
			finding("answered 2xx, not marked success", &rep.WebhookLost, what)
		}
		w.Delivered++
		if s.acked > 1 {
			w.Redelivered++
		}
		if len(s.bodies) > 1 {
			finding("one webhook-id, different bodies", &rep.WebhookMismatch, fmt.Sprintf("%s: %d bodies", what, len(s.bodies)))
		}
		if s.typ != d.Type || s.emailID != d.EmailID {
			finding("webhook-id of another event", &rep.WebhookMismatch, fmt.Sprintf("%s: the body says %s of %s", what, s.typ, s.emailID))
		}
	}
	for id, s := range seen {
		w.Attempts += s.tries
		if !inDB[id] {
			finding("at the endpoint, not in the database", &rep.WebhookMismatch, id)
		}
	}
	for _, ids := range byBody {
		if len(ids) > 1 {
			finding("one event under several webhook-ids", &rep.WebhookMismatch, fmt.Sprint(keys(ids)))
		}
	}
	if badSig > 0 {
		rep.WebhookMismatch += badSig
		rep.Findings = append(rep.Findings, fmt.Sprintf("webhook: %d attempts without a good signature or webhook-id", badSig))
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// hookFigures are the leg's figures in the report.
type hookFigures struct {
	Events      int            `json:"events"`      // deliveries the database holds for the endpoint
	Delivered   int            `json:"delivered"`   // of them answered 2xx at least once
	Redelivered int            `json:"redelivered"` // answered 2xx more than once (allowed: at least once)
	Attempts    int            `json:"attempts"`    // with a good signature
	Answered    map[string]int `json:"answered"`    // attempts by the endpoint's answer
	Windows     map[string]int `json:"windows"`
	// Backlog is the deliveries still pending, not yet answered 2xx, when
	// the wait ended while the backlog was still shrinking (judge): late,
	// not lost.
	Backlog      int `json:"backlog"`
	DrainSeconds int `json:"drain_seconds"` // how long the check waited for the backlog
}
