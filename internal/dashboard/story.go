package dashboard

import (
	"context"
	"net/mail"
	"slices"

	"github.com/sendonce/sendonce/internal/core"
)

// A send's story beyond its events: each recipient's own outcome and the
// webhook deliveries of its events.

// recipient is one address of a send: its outcome (its stored state, or
// the send's status when it has none) and the events about it.
type recipient struct {
	Field, Address string
	Status         core.Status
	Detail         string
	Events         []core.Event
}

func recipientsOf(s *core.Send, events []core.Event) []recipient {
	states := map[string]core.RecipientState{}
	for _, r := range s.Recipients {
		states[core.NormalizeAddress(r.Address)] = r
	}
	var out []recipient
	for _, f := range []struct {
		name string
		list []string
	}{{"to", s.To}, {"cc", s.Cc}, {"bcc", s.Bcc}} {
		for _, a := range f.list {
			addr := bareAddress(a)
			rc := recipient{Field: f.name, Address: a, Status: core.RecipientStatusOf(s.Status)}
			if st, ok := states[addr]; ok {
				rc.Status, rc.Detail = st.Status, st.Detail
			}
			for _, e := range events {
				if e.Recipient != "" && core.NormalizeAddress(e.Recipient) == addr {
					rc.Events = append(rc.Events, e)
				}
			}
			out = append(out, rc)
		}
	}
	return out
}

// bareAddress is a recipient's address without its display name, as
// recipient states and events name it.
func bareAddress(a string) string {
	if p, err := mail.ParseAddress(a); err == nil {
		a = p.Address
	}
	return core.NormalizeAddress(a)
}

// storyEvent is an event of the timeline with the deliveries of it to the
// tenant's webhooks.
type storyEvent struct {
	core.Event
	Deliveries []eventDelivery
}

type eventDelivery struct {
	Hook     *core.Webhook
	Delivery *core.WebhookDelivery
}

// maxDeliveryLookups bounds the point reads (webhook × event, each by
// the deliveries' primary key) one send page makes; past it the page
// links to the webhook pages instead.
const maxDeliveryLookups = 100

// storyOf pairs each event with its webhook deliveries. It reads the
// tenant's first page of webhooks and looks each subscribed (webhook,
// event) pair up by primary key: cheap while both are few, and skipped
// (complete false) when they are not.
func (d *Dashboard) storyOf(ctx context.Context, tenant string, events []core.Event) (out []storyEvent, complete bool, err error) {
	out = make([]storyEvent, len(events))
	for i, e := range events {
		out[i].Event = e
	}
	hooks, more, err := d.reads.ListWebhooks(ctx, tenant, core.WebhookPage{Limit: pageSize})
	if err != nil || len(hooks) == 0 {
		return out, err == nil, err
	}
	type pair struct{ hook, event int }
	var pairs []pair
	for i, e := range events {
		typ, ok := core.WebhookType(e.Type)
		if !ok || e.ID == "" {
			continue
		}
		for j, h := range hooks {
			if slices.Contains(h.Events, typ) {
				pairs = append(pairs, pair{j, i})
			}
		}
	}
	if more || len(pairs) > maxDeliveryLookups {
		return out, false, nil
	}
	for _, p := range pairs {
		x, err := d.reads.WebhookDelivery(ctx, core.WebhookDeliveryRef{Tenant: tenant, WebhookID: hooks[p.hook].ID, EventID: events[p.event].ID})
		if core.ErrorCode(err) == core.CodeNotFound {
			continue // subscribed after the event, or deleted since
		}
		if err != nil {
			return out, false, err
		}
		out[p.event].Deliveries = append(out[p.event].Deliveries, eventDelivery{hooks[p.hook], x})
	}
	return out, true, nil
}
