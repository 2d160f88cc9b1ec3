package inbound

import (
	"context"
	"slices"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// rank orders recipient outcomes: a later report does not take a recipient
// back to a weaker one (a delay notice after its bounce, say). Its event
// is still written: it is what the report said.
var rank = map[core.Status]int{
	core.RecipientDelayed: 1,
	core.StatusDelivered:  2,
	core.StatusBounced:    3,
	core.StatusComplained: 4,
}

func apply(ctx context.Context, tx core.Tx, send *core.Send, changes []change, now time.Time) error {
	stored, err := tx.Recipients(ctx, send.ID)
	if err != nil {
		return err
	}
	state := map[string]core.Status{}
	for _, r := range stored {
		state[r.Address] = r.Status
	}
	for _, c := range changes {
		if err := tx.AddEvent(ctx, send.ID, core.Event{Type: c.event, At: now, Detail: c.detail, Recipient: c.addr, Bounce: c.bounce}); err != nil {
			return err
		}
		if old, ok := state[c.addr]; !ok || rank[c.status] >= rank[old] {
			state[c.addr] = c.status
			if err := tx.SetRecipient(ctx, send.ID, core.RecipientState{Address: c.addr, Status: c.status, Detail: c.detail, UpdatedAt: now}); err != nil {
				return err
			}
		}
		if c.suppress != "" {
			sup := &core.Suppression{ID: app.NewID("sup_"), Tenant: send.Tenant, Address: c.addr, Reason: c.suppress,
				Origin: c.origin, SendID: send.ID, CreatedAt: now}
			if _, err := tx.AddSuppression(ctx, sup); err != nil {
				return err
			}
		}
	}
	next, ok := sendStatus(send, state)
	if !ok || next == send.Status {
		return nil
	}
	send.Status, send.UpdatedAt = next, now
	return tx.UpdateSend(ctx, send)
}

// sendStatus is the send's status once its recipients' outcomes are
// known, for sends already handed off (docs/api.md, "Statuses"): complained
// when a recipient complained, bounced when every recipient that was
// attempted bounced, delivered when each of them was delivered or bounced
// and one was delivered. ok is false when the send keeps its status.
func sendStatus(send *core.Send, state map[string]core.Status) (core.Status, bool) {
	switch send.Status {
	case core.StatusSent, core.StatusDelivered, core.StatusBounced, core.StatusComplained:
	default:
		return "", false // not handed off (or unknown: reconcile decides)
	}
	var all []core.Status
	for _, addr := range recipientsOf(send) {
		st, ok := state[addr]
		if !ok {
			st = core.RecipientStatusOf(send.Status)
		}
		if st != core.StatusSuppressed {
			all = append(all, st)
		}
	}
	only := func(ss ...core.Status) bool {
		return len(all) > 0 && !slices.ContainsFunc(all, func(s core.Status) bool { return !slices.Contains(ss, s) })
	}
	switch {
	case slices.Contains(all, core.StatusComplained):
		return core.StatusComplained, true
	case only(core.StatusBounced):
		return core.StatusBounced, true
	case only(core.StatusBounced, core.StatusDelivered):
		return core.StatusDelivered, true
	}
	return "", false
}
