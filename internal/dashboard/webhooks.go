package dashboard

import (
	"fmt"
	"net/http"
	"path"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/webhook"
)

// The webhook pages read through Reads (every read is of the signed-in
// tenant's rows; another tenant's id is not found) and change webhooks only
// through webhook.Service, as the API's /v1/webhooks routes do.

type webhooksData struct {
	Hooks []*core.Webhook
	Next  string // the next page's cursor
	Types []string
	// Created and Secret are set on the answer to a create or a rotation
	// only: the one response that shows the signing secret.
	Created *core.Webhook
	Secret  string
}

func (d *Dashboard) webhooks(q *req) error {
	return d.renderWebhooks(q, 0, "Webhooks", webhooksData{})
}

func (d *Dashboard) renderWebhooks(q *req, status int, title string, data webhooksData) error {
	list, more, err := d.reads.ListWebhooks(q.ctx(), q.key.Tenant, core.WebhookPage{Limit: pageSize, After: q.r.URL.Query().Get("after")})
	if err != nil {
		return err
	}
	data.Hooks, data.Types = list, core.WebhookTypes()
	if more && len(list) > 0 {
		data.Next = list[len(list)-1].ID
	}
	return d.render(q, status, "webhooks", title, data)
}

// createWebhook checks the endpoint (outbound policy, outside the
// transaction, as the API does) and shows the new signing secret on this
// one response, which no cache keeps (Cache-Control: no-store).
func (d *Dashboard) createWebhook(q *req) error {
	hook, secret, err := d.hooks.Prepare(q.ctx(), q.key.Tenant, q.r.PostFormValue("endpoint"), q.r.PostForm["event"])
	if err == nil {
		err = d.svc.CreateWebhook(q.ctx(), hook) // within the tenant's cap, as the API's
	}
	if err != nil {
		return err
	}
	return d.renderWebhooks(q, http.StatusCreated, "Webhook created", webhooksData{Created: hook, Secret: secret})
}

type webhookData struct {
	Hook       *core.Webhook
	Deliveries []deliveryRow
	Next       string
}

// deliveryRow is a delivery with its event's webhook type.
type deliveryRow struct {
	*core.WebhookDelivery
	Type string
}

func rowOf(d *core.WebhookDelivery) deliveryRow {
	t, _ := core.WebhookType(d.Event)
	return deliveryRow{d, t}
}

func (d *Dashboard) webhook(q *req) error {
	tenant, id := q.key.Tenant, q.r.PathValue("id")
	h, err := d.reads.Webhook(q.ctx(), tenant, id)
	if err != nil {
		return err
	}
	ds, more, err := d.reads.ListWebhookDeliveries(q.ctx(), tenant, id, core.WebhookPage{Limit: pageSize, After: q.r.URL.Query().Get("after")})
	if err != nil {
		return err
	}
	data := webhookData{Hook: h}
	for _, x := range ds {
		data.Deliveries = append(data.Deliveries, rowOf(x))
	}
	if more && len(ds) > 0 {
		data.Next = ds[len(ds)-1].EventID
	}
	return d.render(q, 0, "webhook", "Webhook "+h.Endpoint, data)
}

// setWebhookStatus enables or disables an endpoint (webhook.Service.Update:
// enabling starts its run of failures afresh).
func (d *Dashboard) setWebhookStatus(q *req) error {
	status := q.r.PostFormValue("status")
	p := webhook.Patch{Status: &status}
	if err := d.hooks.CheckPatch(q.ctx(), &p); err != nil {
		return err
	}
	h, err := d.hooks.Update(q.ctx(), q.key.Tenant, q.r.PathValue("id"), p)
	if err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/webhooks/"+h.ID, http.StatusSeeOther)
	return nil
}

// ask is a confirmation page: what will happen, and the button that does it.
type ask struct {
	Action, Warn, Button, Cancel string
}

// webhookAsks are the confirmations of the webhook actions that cannot
// be undone; %s is the endpoint.
var webhookAsks = map[string]struct{ warn, button string }{
	"delete": {"Deleting the webhook for %s stops its deliveries at once and removes it with its delivery log. It cannot be undone.", "Delete"},
	"rotate": {"Rotating gives %s a new signing secret, shown once: every delivery attempted from now on is signed with it, and the receiver refuses them until it has the new one.", "Rotate secret"},
}

func (d *Dashboard) confirmWebhook(q *req) error {
	h, err := d.reads.Webhook(q.ctx(), q.key.Tenant, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	what := path.Base(q.r.URL.Path) // the route: …/delete or …/rotate
	a, ok := webhookAsks[what]
	if !ok {
		return core.ErrNotFound
	}
	return d.render(q, 0, "ask", a.button, ask{Action: "/ui/webhooks/" + h.ID + "/" + what,
		Warn: fmt.Sprintf(a.warn, h.Endpoint), Button: a.button, Cancel: "/ui/webhooks/" + h.ID})
}

func (d *Dashboard) deleteWebhook(q *req) error {
	if err := d.hooks.Delete(q.ctx(), q.key.Tenant, q.r.PathValue("id")); err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/webhooks", http.StatusSeeOther)
	return nil
}

func (d *Dashboard) rotateWebhook(q *req) error {
	h, secret, err := d.hooks.Rotate(q.ctx(), q.key.Tenant, q.r.PathValue("id"))
	if err != nil {
		return err
	}
	return d.renderWebhooks(q, 0, "Signing secret rotated", webhooksData{Created: h, Secret: secret})
}

type deliveryData struct {
	Hook     *core.Webhook
	Delivery deliveryRow
	Attempts []*core.WebhookAttempt
	More     bool
}

func (d *Dashboard) loadDelivery(q *req) (*core.Webhook, *core.WebhookDelivery, error) {
	tenant, id := q.key.Tenant, q.r.PathValue("id")
	h, err := d.reads.Webhook(q.ctx(), tenant, id)
	if err != nil {
		return nil, nil, err
	}
	x, err := d.reads.WebhookDelivery(q.ctx(), core.WebhookDeliveryRef{Tenant: tenant, WebhookID: id, EventID: q.r.PathValue("event")})
	if err != nil {
		return nil, nil, err
	}
	return h, x, nil
}

func (d *Dashboard) delivery(q *req) error {
	h, x, err := d.loadDelivery(q)
	if err != nil {
		return err
	}
	as, more, err := d.reads.ListWebhookAttempts(q.ctx(), core.WebhookDeliveryRef{Tenant: q.key.Tenant, WebhookID: h.ID, EventID: x.EventID}, core.WebhookPage{Limit: pageSize})
	if err != nil {
		return err
	}
	return d.render(q, 0, "delivery", "Delivery "+x.EventID, deliveryData{Hook: h, Delivery: rowOf(x), Attempts: as, More: more})
}

func (d *Dashboard) confirmReplay(q *req) error {
	h, x, err := d.loadDelivery(q)
	if err != nil {
		return err
	}
	base := "/ui/webhooks/" + h.ID + "/events/" + x.EventID
	return d.render(q, 0, "ask", "Replay", ask{Action: base + "/replay", Button: "Replay",
		Warn: fmt.Sprintf("Replaying posts event %s to %s again now, with the same webhook-id, and retries it on the usual schedule: a receiver that does not deduplicate by webhook-id handles it twice.",
			x.EventID, h.Endpoint), Cancel: base})
}

func (d *Dashboard) replayDelivery(q *req) error {
	h, x, err := d.loadDelivery(q)
	if err != nil {
		return err
	}
	if err := d.hooks.Replay(q.ctx(), q.key.Tenant, h.ID, x.EventID); err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/webhooks/"+h.ID+"/events/"+x.EventID, http.StatusSeeOther)
	return nil
}
