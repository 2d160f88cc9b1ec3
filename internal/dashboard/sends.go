package dashboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	msgrender "github.com/sendonce/sendonce/internal/render"
)

const (
	pageSize = 50
	// searchScan bounds how many sends one search reads: the store indexes
	// id, idempotency key, status and whole recipient addresses; part of a
	// recipient, the subject and tags are matched here, among the newest
	// sends.
	searchScan = 10000
	scanBatch  = 1000
)

type sendsData struct {
	Sends    []*core.Send
	Q        string
	Status   string
	Statuses []core.Status
	Next     string
	Live     string // the event stream's URL, "" past the first page
	Scanned  bool   // the search read its bound without filling the page
}

var allStatuses = []core.Status{core.StatusPendingApproval, core.StatusScheduled, core.StatusQueued, core.StatusSending,
	core.StatusSent, core.StatusDelivered, core.StatusFailed, core.StatusBounced, core.StatusComplained,
	core.StatusSuppressed, core.StatusUnknown, core.StatusCanceled}

// filter reads the list's query: status must be a known one.
func (q *req) filter() (core.SendFilter, string, error) {
	v := q.r.URL.Query()
	f := core.SendFilter{Status: core.Status(v.Get("status")), After: v.Get("after"), Limit: pageSize}
	if f.Status != "" && !f.Status.Valid() {
		return f, "", core.Errorf(core.CodeValidation, "status", "unknown status %q", f.Status)
	}
	if q.key.Agent {
		f.APIKeyID = q.key.ID // as in the API: an agent sees only its own sends
	}
	return f, strings.TrimSpace(v.Get("q")), nil
}

func (d *Dashboard) sends(q *req) error {
	f, text, err := q.filter()
	if err != nil {
		return err
	}
	list, next, scanned, err := d.search(q.ctx(), q.key.Tenant, f, text)
	if err != nil {
		return err
	}
	data := sendsData{Sends: list, Q: text, Status: string(f.Status), Statuses: allStatuses, Next: next, Scanned: scanned}
	// Live on the first page of an indexed list only: a text search scans
	// sends, too much to repeat every second.
	if f.After == "" && text == "" {
		data.Live = "/ui/sends/live?" + q.r.URL.RawQuery
	}
	return d.render(q, 0, "sends", "Sends", data)
}

// search returns a page of the tenant's sends matching text: a send id,
// an idempotency key, or part of a recipient, the subject or a tag.
func (d *Dashboard) search(ctx context.Context, tenant string, f core.SendFilter, text string) (list []*core.Send, next string, scanned bool, err error) {
	if text == "" {
		list, next, err = d.reads.ListSends(ctx, tenant, f)
		return list, next, false, err
	}
	if strings.HasPrefix(text, "snd_") && f.APIKeyID == "" { // an agent's search scans its own sends
		s, err := d.reads.Send(ctx, tenant, text)
		if err == nil && (f.Status == "" || s.Status == f.Status) {
			return []*core.Send{s}, "", false, nil
		}
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return nil, "", false, err
		}
	}
	byKey := f
	byKey.IdempotencyKey = text
	if list, _, err = d.reads.ListSends(ctx, tenant, byKey); err != nil || len(list) > 0 {
		return list, "", false, err
	}
	if a, err := mail.ParseAddress(text); err == nil {
		// A whole address: the recipient index finds its sends however old.
		byRecipient := f
		byRecipient.Recipient = core.NormalizeAddress(a.Address)
		if list, next, err = d.reads.ListSends(ctx, tenant, byRecipient); err != nil || len(list) > 0 {
			return list, next, false, err
		}
	}
	needle := strings.ToLower(text)
	scan := f
	scan.Limit = scanBatch
	for read := 0; read < searchScan; {
		batch, more, err := d.reads.ListSends(ctx, tenant, scan)
		if err != nil {
			return nil, "", false, err
		}
		for _, s := range batch {
			read++
			if matches(s, needle) {
				list = append(list, s)
				if len(list) == pageSize {
					return list, s.ID, false, nil
				}
			}
		}
		if more == "" {
			return list, "", false, nil
		}
		scan.After = more
	}
	return list, scan.After, true, nil
}

func matches(s *core.Send, needle string) bool {
	has := func(v string) bool { return strings.Contains(strings.ToLower(v), needle) }
	if s.ID == needle || has(s.Subject) || slices.ContainsFunc(s.To, has) || slices.ContainsFunc(s.Cc, has) || slices.ContainsFunc(s.Bcc, has) {
		return true
	}
	for k, v := range s.Tags {
		if has(k) || has(v) || has(k+":"+v) {
			return true
		}
	}
	return false
}

func (d *Dashboard) sendsLive(q *req) error {
	f, _, err := q.filter()
	if err != nil {
		return err
	}
	f.After = ""
	return d.live(q, func(ctx context.Context) ([]liveRow, error) {
		list, _, err := d.reads.ListSends(ctx, q.key.Tenant, f)
		if err != nil {
			return nil, err
		}
		return renderRows(d, list, "sendrow", func(s *core.Send) string { return s.ID })
	})
}

// renderRows renders each item with a partial template, for a live list.
func renderRows[T any](d *Dashboard, items []T, tmpl string, id func(T) string) ([]liveRow, error) {
	t := d.pages["sends"]
	out := make([]liveRow, 0, len(items))
	var buf bytes.Buffer
	for _, it := range items {
		buf.Reset()
		if err := t.ExecuteTemplate(&buf, tmpl, it); err != nil {
			return nil, fmt.Errorf("render %s: %w", tmpl, err)
		}
		out = append(out, liveRow{ID: id(it), HTML: buf.String()})
	}
	return out, nil
}

type sendData struct {
	Send       *core.Send
	Events     []storyEvent
	Recipients []recipient
	// AllDeliveries is false when the tenant has too many webhooks for
	// the page to look every delivery up (storyOf).
	AllDeliveries bool
	Headers       string
	Actions       []action
	Remote        bool
}

// action is something an admin may do to a send in its status, with the
// sentence the confirmation shows.
type action struct {
	Name, Label, Confirm string
}

// actionsFor lists what may be done to a send in its status.
func actionsFor(s *core.Send) []action {
	to := strings.Join(s.To, ", ")
	switch s.Status {
	case core.StatusPendingApproval:
		return []action{
			{"approve", "Approve", "Approving queues this send for delivery now: it goes to " + to + " and cannot be called back."},
			{"reject", "Reject", "Rejecting cancels this send: nothing is sent to " + to + ", and it cannot be approved later."},
		}
	case core.StatusScheduled:
		at := "its time"
		if s.ScheduledAt != nil {
			at = s.ScheduledAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		return []action{
			{"cancel", "Cancel", "Canceling stops this send before " + at + ": nothing is sent to " + to + ", and it cannot be scheduled again."},
		}
	case core.StatusUnknown:
		return []action{
			{"reconcile-sent", "It was sent", "Marks the send sent: you checked that " + to + " received it. Nothing is sent again."},
			{"reconcile-failed", "It was not sent", "Marks the send failed: you checked that it never arrived. Nothing is sent."},
			{"reconcile-resend", "Send it again", "Queues the send for another delivery to " + to + ": if the first attempt did arrive, the recipient gets it twice."},
		}
	}
	return nil
}

func (d *Dashboard) loadSend(q *req) (*core.Send, []core.Event, error) {
	s, events, err := d.reads.SendWithEvents(q.ctx(), q.key.Tenant, q.r.PathValue("id"))
	if err != nil {
		return nil, nil, err
	}
	if q.key.Agent && !d.ownSend(q, s.ID) {
		return nil, nil, core.ErrNotFound
	}
	return s, events, nil
}

// ownSend reports whether the agent key created the send (the API lists an
// agent only its own sends; the dashboard shows it no others either).
func (d *Dashboard) ownSend(q *req, id string) bool {
	list, _, err := d.reads.ListSends(q.ctx(), q.key.Tenant, core.SendFilter{APIKeyID: q.key.ID, After: id + "~", Limit: 1})
	return err == nil && len(list) == 1 && list[0].ID == id
}

func (d *Dashboard) send(q *req) error {
	s, events, err := d.loadSend(q)
	if err != nil {
		return err
	}
	story, all, err := d.storyOf(q.ctx(), q.key.Tenant, events)
	if err != nil {
		return err
	}
	data := sendData{Send: s, Events: story, AllDeliveries: all, Recipients: recipientsOf(s, events), Remote: q.r.URL.Query().Get("remote") == "1"}
	if raw, _, err := msgrender.Message(s); err == nil {
		head, _, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
		data.Headers = string(head)
	}
	if q.admin() {
		data.Actions = actionsFor(s)
	}
	return d.render(q, 0, "send", "Send "+s.ID, data)
}

// mailCSP is the policy of a message's HTML: no script, no plugin, no
// form, nothing remote; inline styles and data: images only. remote adds
// remote images and styles, which the user asked for.
func mailCSP(remote bool) string {
	img, style := "data: cid:", "'unsafe-inline'"
	if remote {
		img, style = "data: cid: http: https:", "'unsafe-inline' http: https:"
	}
	return "default-src 'none'; img-src " + img + "; style-src " + style + "; font-src data:; frame-ancestors 'self'; sandbox"
}

// writeMailHTML serves a message's HTML for the sandboxed frame.
func writeMailHTML(q *req, html string) error {
	h := q.w.Header()
	h.Set("Content-Security-Policy", mailCSP(q.r.URL.Query().Get("remote") == "1"))
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("Content-Type", "text/html; charset=utf-8")
	_, err := q.w.Write([]byte(html))
	return err
}

func (d *Dashboard) sendHTML(q *req) error {
	s, _, err := d.loadSend(q)
	if err != nil {
		return err
	}
	return writeMailHTML(q, s.HTML)
}

func (d *Dashboard) sendRaw(q *req) error {
	s, _, err := d.loadSend(q)
	if err != nil {
		return err
	}
	raw, _, err := msgrender.Message(s)
	if err != nil {
		return err
	}
	q.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err = q.w.Write(raw)
	return err
}

type confirmData struct {
	Send   *core.Send
	Action action
}

func (d *Dashboard) findAction(q *req, name string) (*core.Send, action, error) {
	s, _, err := d.loadSend(q)
	if err != nil {
		return nil, action{}, err
	}
	for _, a := range actionsFor(s) {
		if a.Name == name {
			return s, a, nil
		}
	}
	return nil, action{}, core.Errorf(core.CodeInvalidState, "", "send %s is %s: %q is not something it can do now", s.ID, s.Status, name)
}

func (d *Dashboard) confirmAction(q *req) error {
	s, a, err := d.findAction(q, q.r.URL.Query().Get("action"))
	if err != nil {
		return err
	}
	return d.render(q, 0, "confirm", a.Label, confirmData{Send: s, Action: a})
}

// sendAction does a confirmed action through the app's service, as the
// API's approve, reject and reconcile routes do.
func (d *Dashboard) sendAction(q *req) error {
	s, a, err := d.findAction(q, q.r.PostFormValue("action"))
	if err != nil {
		return err
	}
	tenant := q.key.Tenant
	switch a.Name {
	case "approve":
		_, err = d.svc.ApproveSend(q.ctx(), tenant, s.ID)
	case "reject":
		_, err = d.svc.RejectSend(q.ctx(), tenant, s.ID)
	case "cancel":
		_, err = d.svc.CancelSend(q.ctx(), q.key, s.ID)
	default:
		_, err = d.svc.ReconcileSend(q.ctx(), tenant, s.ID, strings.TrimPrefix(a.Name, "reconcile-"))
	}
	if err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/sends/"+s.ID, http.StatusSeeOther)
	return nil
}

func (d *Dashboard) approvals(q *req) error {
	f := core.SendFilter{Status: core.StatusPendingApproval, Limit: pageSize, After: q.r.URL.Query().Get("after")}
	if q.key.Agent {
		f.APIKeyID = q.key.ID
	}
	list, next, err := d.reads.ListSends(q.ctx(), q.key.Tenant, f)
	if err != nil {
		return err
	}
	return d.render(q, 0, "approvals", "Approvals", sendsData{Sends: list, Next: next})
}

// dayCount is one day of the overview.
type dayCount struct {
	Day                             string
	Accepted, Sent, Failed, Unknown int
}

type overviewData struct {
	Days []dayCount
	// Active are the days with sends, the chart's table; Bars the chart.
	Active     []dayCount
	Bars       []chartBar
	ChartW     int
	Max        int
	Pending    int
	Unknown    int
	Duplicates map[string]float64
	DupTotal   float64
	Costs      []costLine
	PricesAsOf string
	Empty      bool
}

// overviewDays is how far back the overview's chart goes.
const overviewDays = 14

func (d *Dashboard) overview(q *req) error {
	now := d.svc.Now()
	from := now.Truncate(24*time.Hour).AddDate(0, 0, -(overviewDays - 1))
	agent := ""
	if q.key.Agent {
		agent = q.key.ID
	}
	data := overviewData{PricesAsOf: pricesAsOf}
	byDay := map[string]*dayCount{}
	for i := range overviewDays {
		data.Days = append(data.Days, dayCount{Day: from.AddDate(0, 0, i).Format("2006-01-02")})
	}
	for i := range data.Days {
		byDay[data.Days[i].Day] = &data.Days[i]
	}
	counts, err := d.cfg.Stats.DailySendCounts(q.ctx(), q.key.Tenant, agent, from)
	if err != nil {
		return err
	}
	for _, c := range counts {
		day, ok := byDay[c.Day.Format("2006-01-02")]
		if !ok {
			continue
		}
		day.Accepted += c.N
		switch c.Status {
		case core.StatusSent, core.StatusDelivered:
			day.Sent += c.N
		case core.StatusFailed, core.StatusBounced, core.StatusComplained, core.StatusSuppressed:
			day.Failed += c.N
		case core.StatusUnknown:
			day.Unknown += c.N
		}
	}
	waiting, err := d.cfg.Stats.CountSendsInStatus(q.ctx(), q.key.Tenant, agent, core.StatusPendingApproval, core.StatusUnknown)
	if err != nil {
		return err
	}
	data.Pending, data.Unknown = waiting[core.StatusPendingApproval], waiting[core.StatusUnknown]
	for _, c := range data.Days {
		data.Max = max(data.Max, c.Accepted)
	}
	if data.Max == 0 && data.Pending == 0 && data.Unknown == 0 {
		any, _, err := d.reads.ListSends(q.ctx(), q.key.Tenant, core.SendFilter{Limit: 1, APIKeyID: agent})
		if err != nil {
			return err
		}
		data.Empty = len(any) == 0
	}
	data.Max = max(data.Max, 1)
	for _, c := range data.Days {
		if c.Accepted > 0 {
			data.Active = append(data.Active, c)
		}
	}
	data.Bars, data.ChartW = chartBars(data.Days, data.Max), overviewDays*chartBarWidth
	data.Duplicates, data.DupTotal = d.duplicates()
	data.Costs = costs(data.DupTotal)
	return d.render(q, 0, "overview", "Overview", data)
}
