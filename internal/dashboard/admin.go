package dashboard

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/metrics"
)

// duplicates reads sendonce_duplicates_prevented_total by via: this
// process's count since it started, all tenants together.
func (d *Dashboard) duplicates() (map[string]float64, float64) {
	out := map[string]float64{}
	if d.cfg.Metrics == nil {
		return out, 0
	}
	total := 0.0
	for _, v := range metrics.DuplicateVias {
		var m dto.Metric
		if err := d.cfg.Metrics.DuplicatesPrevented.WithLabelValues(v).Write(&m); err == nil {
			out[v] = m.GetCounter().GetValue()
			total += out[v]
		}
	}
	return out, total
}

type keysData struct {
	Keys    []*core.APIKey
	Created *core.APIKey
	Secret  string
}

func (d *Dashboard) keys(q *req) error {
	list, err := d.svc.TenantKeys(q.ctx(), q.key.Tenant)
	if err != nil {
		return err
	}
	return d.render(q, 0, "keys", "API keys", keysData{Keys: list})
}

// splitList reads a comma- or line-separated form field.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func formInt(r *http.Request, name string) (int, error) {
	v := strings.TrimSpace(r.PostFormValue(name))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, core.Errorf(core.CodeValidation, name, "%s must be a whole number, 0 or more", name)
	}
	return n, nil
}

// createKey creates a key through the service and shows its secret on this
// one response, which no cache keeps (Cache-Control: no-store).
func (d *Dashboard) createKey(q *req) error {
	r := q.r
	scopes, err := core.ParseScopes(strings.Join(r.PostForm["scope"], ","))
	if err != nil {
		return err
	}
	p := app.NewKeyParams{Name: strings.TrimSpace(r.PostFormValue("name")), Tenant: q.key.Tenant, Scopes: scopes,
		RequiresApproval: r.PostFormValue("requires_approval") == "on", Agent: r.PostFormValue("agent") == "on",
		AllowRecipients: splitList(r.PostFormValue("allow_recipients"))}
	if p.MaxPerHour, err = formInt(r, "max_per_hour"); err != nil {
		return err
	}
	if p.MaxPerDay, err = formInt(r, "max_per_day"); err != nil {
		return err
	}
	// By the signed-in key, as every door does: the new key is no freer
	// than the one that made it.
	k, secret, err := d.svc.CreateKeyBy(q.ctx(), q.key, p)
	if err != nil {
		return err
	}
	list, err := d.svc.TenantKeys(q.ctx(), q.key.Tenant)
	if err != nil {
		return err
	}
	return d.render(q, http.StatusCreated, "keys", "API key created", keysData{Keys: list, Created: k, Secret: secret})
}

func (d *Dashboard) tenantKey(q *req) (*core.APIKey, error) {
	k, err := d.reads.APIKey(q.ctx(), q.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if k.Tenant != q.key.Tenant || k.RevokedAt != nil {
		return nil, core.ErrNotFound
	}
	return k, nil
}

func (d *Dashboard) confirmRevoke(q *req) error {
	k, err := d.tenantKey(q)
	if err != nil {
		return err
	}
	return d.render(q, 0, "revoke", "Revoke "+k.Name, struct {
		Key  *core.APIKey
		Self bool
	}{k, k.ID == q.key.ID})
}

func (d *Dashboard) revokeKey(q *req) error {
	k, err := d.tenantKey(q)
	if err != nil {
		return err
	}
	if err := d.svc.RevokeTenantKey(q.ctx(), q.key.Tenant, k.ID); err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/keys", http.StatusSeeOther)
	return nil
}

func (d *Dashboard) domains(q *req) error {
	list, err := d.svc.ListDomains(q.ctx(), q.key.Tenant)
	if err != nil {
		return err
	}
	return d.render(q, 0, "domains", "Domains", list)
}

type domainData struct {
	Domain  *core.Domain
	Records []app.PublishRecord
	Report  *dnscheck.Report
	Level   dnscheck.Level
}

func (d *Dashboard) loadDomain(q *req) (domainData, error) {
	dom, err := d.reads.Domain(q.ctx(), q.key.Tenant, q.r.PathValue("domain"))
	if err != nil {
		return domainData{}, err
	}
	recs, err := app.DomainRecords(dom)
	if err != nil {
		return domainData{}, err
	}
	return domainData{Domain: dom, Records: recs}, nil
}

func (d *Dashboard) domain(q *req) error {
	data, err := d.loadDomain(q)
	if err != nil {
		return err
	}
	return d.render(q, 0, "domain", data.Domain.Domain, data)
}

// checkDomain runs the DNS check through the server's resolver, as the
// API's check route does (admin scope: it makes the server query DNS),
// a pending DKIM key whose record is published becoming the signing key.
func (d *Dashboard) checkDomain(q *req) error {
	data, err := d.loadDomain(q)
	if err != nil {
		return err
	}
	res, err := d.svc.CheckStoredDomain(q.ctx(), app.DNSCheck{Tenant: q.key.Tenant, Domain: data.Domain.Domain})
	if err != nil {
		return err
	}
	if res.Promoted != "" {
		if data, err = d.loadDomain(q); err != nil { // the records to show changed
			return err
		}
	}
	data.Report, data.Level = res.Report, res.Report.Level()
	return d.render(q, 0, "domain", data.Domain.Domain, data)
}

func (d *Dashboard) audit(q *req) error {
	list, next, err := d.reads.ListAudit(q.ctx(), q.key.Tenant, pageSize, q.r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	return d.render(q, 0, "audit", "Audit log", struct {
		Entries []*core.AuditEntry
		Next    string
	}{list, next})
}

func (d *Dashboard) templates(q *req) error {
	if id := q.r.URL.Query().Get("id"); id != "" { // the "new template" form
		if !app.ValidID(id) {
			return core.Errorf(core.CodeValidation, "id", "template ids are 1 to 128 letters, digits, '.', '_' or '-'")
		}
		http.Redirect(q.w, q.r, "/ui/templates/"+id, http.StatusSeeOther)
		return nil
	}
	list, err := d.reads.ListTemplates(q.ctx(), q.key.Tenant)
	if err != nil {
		return err
	}
	return d.render(q, 0, "templates", "Templates", list)
}

type templateData struct {
	T         *core.Template
	New       bool
	Variables string
	Preview   *preview
	Saved     bool
}

// preview is a template rendered with sample variables.
type preview struct {
	Subject string `json:"subject"`
	Text    string `json:"text"`
	HTML    string `json:"html"`
	Error   string `json:"error,omitempty"`
}

const sampleVariables = `{"name": "Ada"}`

func (d *Dashboard) template(q *req) error {
	id := q.r.PathValue("id")
	t, err := d.reads.Template(q.ctx(), q.key.Tenant, id)
	isNew := false
	if core.ErrorCode(err) == core.CodeNotFound && q.admin() && app.ValidID(id) {
		t, err, isNew = &core.Template{ID: id}, nil, true
	}
	if err != nil {
		return err
	}
	data := templateData{T: t, New: isNew, Variables: sampleVariables, Saved: q.r.URL.Query().Get("saved") == "1"}
	p := render(t, sampleVariables)
	data.Preview = &p
	return d.render(q, 0, "template", "Template "+t.ID, data)
}

// formTemplate is the template the form describes.
func formTemplate(q *req) *core.Template {
	r := q.r
	return &core.Template{Tenant: q.key.Tenant, ID: r.PathValue("id"), Subject: r.PostFormValue("subject"),
		Text: r.PostFormValue("text"), HTML: r.PostFormValue("html")}
}

func render(t *core.Template, variables string) preview {
	var vars map[string]any
	if strings.TrimSpace(variables) != "" {
		if err := json.Unmarshal([]byte(variables), &vars); err != nil {
			return preview{Error: "the sample variables are not a JSON object: " + err.Error()}
		}
	}
	subject, text, html, err := app.RenderTemplate(t, vars)
	if err != nil {
		return preview{Error: err.Error()}
	}
	return preview{Subject: subject, Text: text, HTML: html}
}

// saveTemplate stores the form through the service; with "preview" it
// only renders it (the page without script previews this way).
func (d *Dashboard) saveTemplate(q *req) error {
	t := formTemplate(q)
	vars := q.r.PostFormValue("variables")
	if q.r.PostFormValue("do") == "preview" {
		p := render(t, vars)
		return d.render(q, 0, "template", "Template "+t.ID, templateData{T: t, Variables: vars, Preview: &p})
	}
	_, err := d.svc.SaveTemplate(q.ctx(), t)
	if core.ErrorCode(err) == core.CodeValidation || core.ErrorCode(err) == core.CodeTemplateMissingVar {
		p := render(t, vars)
		p.Error = err.Error()
		return d.render(q, http.StatusBadRequest, "template", "Template "+t.ID, templateData{T: t, Variables: vars, Preview: &p})
	}
	if err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/ui/templates/"+t.ID+"?saved=1", http.StatusSeeOther)
	return nil
}

// previewTemplate answers the live preview's script with JSON; it stores
// nothing. It renders text the caller posts, not a stored template: admin
// scope, as for saving it (a read key may look at templates, not run its
// own).
func (d *Dashboard) previewTemplate(q *req) error {
	p := render(formTemplate(q), q.r.PostFormValue("variables"))
	q.w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(q.w).Encode(p)
}
