package dashboard

import (
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

type suppressionsData struct {
	List  []*core.Suppression
	Email string
	Next  string
	// Added is the entry an add made or found (Existed: it was already
	// on the list).
	Added   *core.Suppression
	Existed bool
}

// suppressions lists the tenant's suppression list, newest first; ?email
// finds one address (the store matches whole addresses, any case).
func (d *Dashboard) suppressions(q *req) error {
	return d.renderSuppressions(q, 0, suppressionsData{})
}

func (d *Dashboard) renderSuppressions(q *req, status int, data suppressionsData) error {
	v := q.r.URL.Query()
	f := core.SuppressionFilter{Limit: pageSize, After: v.Get("after")}
	if email := strings.TrimSpace(v.Get("email")); email != "" {
		addr, err := app.SuppressionAddress("email", email)
		if err != nil {
			return err
		}
		f.Email, data.Email = addr, email
	}
	list, next, err := d.reads.ListSuppressions(q.ctx(), q.key.Tenant, f)
	if err != nil {
		return err
	}
	data.List, data.Next = list, next
	return d.render(q, status, "suppressions", "Suppressions", data)
}

// addSuppression puts an address on the list through the app's service,
// as POST /v1/suppressions does.
func (d *Dashboard) addSuppression(q *req) error {
	sup, created, err := d.svc.SuppressAddress(q.ctx(), q.key.Tenant, q.r.PostFormValue("email"), strings.TrimSpace(q.r.PostFormValue("reason")))
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	return d.renderSuppressions(q, status, suppressionsData{Added: sup, Existed: !created})
}

func (d *Dashboard) tenantSuppression(q *req) (*core.Suppression, error) {
	id := q.r.PathValue("id")
	if !strings.HasPrefix(id, "sup_") { // by id only: an address here would be a second way in
		return nil, core.ErrNotFound
	}
	return d.reads.Suppression(q.ctx(), q.key.Tenant, id)
}

func (d *Dashboard) confirmRemoveSuppression(q *req) error {
	sup, err := d.tenantSuppression(q)
	if err != nil {
		return err
	}
	return d.render(q, 0, "ask", "Remove "+sup.Address, ask{Action: "/ui/suppressions/" + sup.ID + "/remove", Button: "Remove",
		Warn:   "Removing " + sup.Address + " lets sends to it be delivered again. If it was added by a bounce or a complaint, the next mail may bounce or be reported again, which harms the domain's reputation.",
		Cancel: "/ui/suppressions"})
}

func (d *Dashboard) removeSuppression(q *req) error {
	sup, err := d.tenantSuppression(q)
	if err != nil {
		return err
	}
	if _, err := d.svc.RemoveSuppression(q.ctx(), q.key.Tenant, sup.ID); err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/suppressions", http.StatusSeeOther)
	return nil
}

// unmatched lists inbound mail the bounce listener kept because it could
// not use it (admin, as GET /v1/inbound/unmatched).
func (d *Dashboard) unmatched(q *req) error {
	list, err := d.reads.ListUnmatched(q.ctx(), q.key.Tenant, pageSize)
	if err != nil {
		return err
	}
	return d.render(q, 0, "unmatched", "Unmatched inbound", list)
}
