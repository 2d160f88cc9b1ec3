package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"
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

// drained says whether every delivery succeeded and was answered 2xx by
// the endpoint.
func (l *hookLeg) drained(ds []hookDelivery) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		if s := l.seen[d.ID]; d.Status != "success" || s == nil || s.acked == 0 {
			return false
		}
	}
	return true
}

// judge waits (up to drain) for the endpoint's deliveries to finish —
// a failed attempt waits for its retry, one cut short by a killed worker
// for its lease (30 s) — then checks them into rep.
func (l *hookLeg) judge(ctx context.Context, api *soakAPI, drain time.Duration, rep *soakReport, logger *slog.Logger) error {
	deadline := time.Now().Add(drain)
	var ds []hookDelivery
	for {
		var err error
		if ds, err = l.deliveries(ctx, api); err != nil {
			return err
		}
		if l.drained(ds) {
			break
		}
		if time.Now().After(deadline) {
			logger.Warn("webhook deliveries not drained before the bound; checking anyway", slog.Duration("drain", drain))
			break
		}
		if !sleepCtx(ctx, time.Second) {
			return ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	judgeHooks(ds, l.seen, l.byBody, l.badSig, rep)
	for k, v := range l.answered {
		rep.Webhooks.Answered[k] += v
	}
	logger.Info("webhook leg judged", slog.Int("events", len(ds)), slog.Int("seen", len(l.seen)))
	return nil
}

// judgeHooks checks the endpoint's record against the database's
// deliveries: each delivered (answered 2xx) at least once and marked
// success; each webhook-id with one body, of the type and send the
// database gives it; each body under one webhook-id; no attempt without
// a good signature; nothing at the endpoint the database does not hold.
func judgeHooks(ds []hookDelivery, seen map[string]*hookSeen, byBody map[[32]byte]map[string]bool, badSig int, rep *soakReport) {
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
		case s == nil || s.acked == 0:
			finding("not delivered", &rep.WebhookLost, what)
			continue
		case d.Status != "success":
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
}
