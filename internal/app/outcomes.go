package app

import (
	"context"
	"net/mail"
	"slices"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// What a report about a handed-off send does to it — a bounce report
// (internal/mxserver) or a provider's event (providerevents.go): each
// recipient's outcome, its event and suppression, and the send's status,
// in the caller's transaction.

// RecipientChange is what a report says of one recipient of a send.
type RecipientChange struct {
	Address string // normalized, one of the send's recipients
	Status  core.Status
	Event   string
	Detail  string
	Bounce  *core.Bounce
	// Suppress is the reason to add the address to the suppression list,
	// "" for none; Origin is where it came from (core.Suppression…).
	Suppress, Origin string
}

// rank orders recipient outcomes: a later report does not take a recipient
// back to a weaker one (a delay notice after its bounce, say). Its event
// is still written: it is what the report said.
var rank = map[core.Status]int{
	core.RecipientDelayed: 1,
	core.StatusDelivered:  2,
	core.StatusBounced:    3,
	core.StatusComplained: 4,
}

// RecipientsOf lists the send's recipients, normalized, each once.
func RecipientsOf(s *core.Send) []string {
	var out []string
	for _, list := range [][]string{s.To, s.Cc, s.Bcc} {
		for _, r := range list {
			a, err := mail.ParseAddress(r)
			if err != nil {
				continue
			}
			if n := core.NormalizeAddress(a.Address); !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// ApplyRecipientChanges writes the changes' events, recipient states and
// suppressions, and the send's status they lead to.
func ApplyRecipientChanges(ctx context.Context, tx core.Tx, send *core.Send, changes []RecipientChange, now time.Time) error {
	stored, err := tx.Recipients(ctx, send.ID)
	if err != nil {
		return err
	}
	state := map[string]core.Status{}
	for _, r := range stored {
		state[r.Address] = r.Status
	}
	for _, c := range changes {
		if err := tx.AddEvent(ctx, send.ID, core.Event{Type: c.Event, At: now, Detail: c.Detail, Recipient: c.Address, Bounce: c.Bounce}); err != nil {
			return err
		}
		if old, ok := state[c.Address]; !ok || rank[c.Status] >= rank[old] {
			state[c.Address] = c.Status
			if err := tx.SetRecipient(ctx, send.ID, core.RecipientState{Address: c.Address, Status: c.Status, Detail: c.Detail, UpdatedAt: now}); err != nil {
				return err
			}
		}
		if c.Suppress != "" {
			sup := &core.Suppression{ID: NewID("sup_"), Tenant: send.Tenant, Address: c.Address, Reason: c.Suppress,
				Origin: c.Origin, SendID: send.ID, CreatedAt: now}
			if _, err := tx.AddSuppression(ctx, sup); err != nil {
				return err
			}
		}
	}
	next, ok := sendStatus(send, state)
	if !ok || next == send.Status {
		return nil
	}
	if err := keepUnnamed(ctx, tx, send, stored, changes, now); err != nil {
		return err
	}
	send.Status, send.UpdatedAt = next, now
	return tx.UpdateSend(ctx, send)
}

// keepUnnamed stores, for each recipient no report has named yet, the
// status it has now (its send's), before the send's status changes: one
// recipient's complaint makes the send complained, and a recipient with no
// state of its own would otherwise take that status too.
func keepUnnamed(ctx context.Context, tx core.Tx, send *core.Send, stored []core.RecipientState, changes []RecipientChange, now time.Time) error {
	named := map[string]bool{}
	for _, r := range stored {
		named[r.Address] = true
	}
	for _, c := range changes {
		named[c.Address] = true
	}
	st := core.RecipientStatusOf(send.Status)
	for _, addr := range RecipientsOf(send) {
		if named[addr] {
			continue
		}
		if err := tx.SetRecipient(ctx, send.ID, core.RecipientState{Address: addr, Status: st, UpdatedAt: now}); err != nil {
			return err
		}
	}
	return nil
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
		return "", false // not handed off (or unknown: reconcile or a provider's evidence decides)
	}
	var all []core.Status
	for _, addr := range RecipientsOf(send) {
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
