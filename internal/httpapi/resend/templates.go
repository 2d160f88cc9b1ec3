package resend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// Resend's hosted templates on sendonce's templates (app.PutTemplate,
// RenderTemplate). Resend writes a variable as {{{KEY}}}; sendonce's
// templates are Go templates, so {{{KEY}}} is stored as {{.KEY}} and shown
// back as {{{KEY}}}. What Resend has and sendonce does not (name, alias,
// from, reply_to, declared variables with fallbacks, published state) is
// kept beside the template in core.Template.Compat.

// resendVarKey is what a variable key may be: a Go template field name.
var resendVarKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,99}$`)

var (
	resendPlaceholder = regexp.MustCompile(`\{\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\}`)
	goPlaceholder     = regexp.MustCompile(`\{\{\.([A-Za-z_][A-Za-z0-9_]*)\}\}`)
)

func toGoTemplate(s string) string   { return resendPlaceholder.ReplaceAllString(s, "{{.$1}}") }
func fromGoTemplate(s string) string { return goPlaceholder.ReplaceAllString(s, "{{{$1}}}") }

type resendVariable struct {
	ID            string `json:"id"`
	Key           string `json:"key"`
	Type          string `json:"type"`
	FallbackValue any    `json:"fallback_value"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
}

// templateCompat is what core.Template.Compat holds.
type templateCompat struct {
	Name        string           `json:"name"`
	Alias       string           `json:"alias"`
	From        string           `json:"from"`
	ReplyTo     []string         `json:"reply_to"`
	Variables   []resendVariable `json:"variables"`
	Status      string           `json:"status"` // draft or published
	PublishedAt *string          `json:"published_at"`
}

// compatOf reads a template's compat; a native template reads as a
// published one named by its id (it is live, as every sendonce template).
func compatOf(t *core.Template) templateCompat {
	var c templateCompat
	if t.Compat == "" || json.Unmarshal([]byte(t.Compat), &c) != nil {
		c = templateCompat{Name: t.ID, Status: "published"}
	}
	if c.Variables == nil {
		c.Variables = []resendVariable{}
	}
	return c
}

// resendTemplateFields are the fields create and update take; nil or ""
// leaves a field as it is on update (resend-go sends "" for fields not
// set, so "" cannot mean "clear").
type resendTemplateFields struct {
	Name      string          `json:"name"`
	Alias     string          `json:"alias"`
	From      string          `json:"from"`
	Subject   string          `json:"subject"`
	ReplyTo   kit.AddrList    `json:"reply_to"`
	HTML      string          `json:"html"`
	Text      string          `json:"text"`
	Variables json.RawMessage `json:"variables"`
}

// apply writes f onto t and c (the stored template, or a new one).
func (f *resendTemplateFields) apply(t *core.Template, c *templateCompat, now time.Time) error {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&c.Name, f.Name)
	set(&c.Alias, f.Alias)
	set(&c.From, f.From)
	set(&t.Subject, toGoTemplate(f.Subject))
	set(&t.HTML, toGoTemplate(f.HTML))
	set(&t.Text, toGoTemplate(f.Text))
	if f.ReplyTo != nil {
		c.ReplyTo = f.ReplyTo
	}
	if c.Alias != "" && !app.ValidID(c.Alias) {
		return core.Errorf(core.CodeValidation, "alias", "an alias is 1 to 128 letters, digits, '.', '_' or '-'")
	}
	if len(f.Variables) == 0 || string(f.Variables) == "null" {
		return nil
	}
	var vars []struct {
		Key           string `json:"key"`
		Type          string `json:"type"`
		FallbackValue any    `json:"fallback_value"`
	}
	if err := json.Unmarshal(f.Variables, &vars); err != nil {
		return core.Errorf(core.CodeValidation, "variables", "variables is an array of {key, type, fallback_value}")
	}
	c.Variables = []resendVariable{}
	for i, v := range vars {
		if !resendVarKey.MatchString(v.Key) {
			return core.Errorf(core.CodeValidation, "variables", "variable %d: a key is letters, digits and underscores, not starting with a digit", i)
		}
		if v.Type != "string" && v.Type != "number" {
			return core.Errorf(core.CodeValidation, "variables", "variable %s: type is string or number", v.Key)
		}
		at := kit.RFC3339(now)
		c.Variables = append(c.Variables, resendVariable{ID: fmt.Sprintf("%s_%s", t.ID, v.Key), Key: v.Key, Type: v.Type,
			FallbackValue: v.FallbackValue, CreatedAt: at, UpdatedAt: at})
	}
	return nil
}

// withCompat checks c and keeps it in t.
func withCompat(t *core.Template, c templateCompat) error {
	if c.Name == "" {
		return core.Errorf(core.CodeValidation, "name", "name is required")
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	t.Compat = string(b)
	return nil
}

// putResendTemplate validates and stores t with c, through the one rule
// of templates (app.PutTemplate), in the caller's transaction.
func (s *API) putResendTemplate(ctx context.Context, tx core.Tx, t *core.Template, c templateCompat) error {
	if err := withCompat(t, c); err != nil {
		return err
	}
	created := t.CreatedAt
	if _, err := s.Svc.PutTemplate(ctx, tx, t); err != nil {
		return err
	}
	if !created.IsZero() {
		t.CreatedAt = created
	}
	return nil
}

func (s *API) CreateTemplate(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var f resendTemplateFields
	if err := kit.DecodeStrict(body, &f); err != nil {
		return 0, nil, err
	}
	t := &core.Template{Tenant: key.Tenant, ID: app.NewID("tpl_")}
	c := templateCompat{Status: "draft"}
	if err := f.apply(t, &c, s.Svc.Now()); err != nil {
		return 0, nil, err
	}
	if err := s.checkAliasFree(ctx, key.Tenant, t.ID, c.Alias); err != nil {
		return 0, nil, err
	}
	if err := s.putResendTemplate(ctx, tx, t, c); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, resendRef{Object: "template", ID: t.ID}, nil
}

// resendTemplate finds a template by id or by alias, as Resend does.
func (s *API) resendTemplate(ctx context.Context, tenant, ident string) (*core.Template, error) {
	t, err := s.Reads.Template(ctx, tenant, ident)
	if !errors.Is(err, core.ErrNotFound) {
		return t, err
	}
	ts, err := s.Reads.ListTemplates(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if a := compatOf(t).Alias; a != "" && a == ident {
			return t, nil
		}
	}
	return nil, core.ErrNotFound
}

// checkAliasFree refuses an alias another template of the tenant has (or
// that is another template's id): an identifier names one template.
func (s *API) checkAliasFree(ctx context.Context, tenant, id, alias string) error {
	if alias == "" {
		return nil
	}
	t, err := s.resendTemplate(ctx, tenant, alias)
	switch {
	case errors.Is(err, core.ErrNotFound):
		return nil
	case err != nil:
		return err
	case t.ID != id:
		return core.Errorf(core.CodeConflict, "alias", "alias %q names another template", alias)
	}
	return nil
}

// resendTemplateView is Resend's template object.
type resendTemplateView struct {
	Object      string           `json:"object"`
	ID          string           `json:"id"`
	Alias       *string          `json:"alias"`
	Name        string           `json:"name"`
	CreatedAt   string           `json:"created_at"`
	UpdatedAt   string           `json:"updated_at"`
	Status      string           `json:"status"`
	PublishedAt *string          `json:"published_at"`
	From        *string          `json:"from"`
	Subject     string           `json:"subject"`
	ReplyTo     []string         `json:"reply_to"`
	HTML        string           `json:"html"`
	Text        string           `json:"text"`
	Variables   []resendVariable `json:"variables"`
}

func viewResendTemplate(t *core.Template) resendTemplateView {
	c := compatOf(t)
	return resendTemplateView{Object: "template", ID: t.ID, Alias: kit.OptString(c.Alias), Name: c.Name,
		CreatedAt: kit.RFC3339(t.CreatedAt), UpdatedAt: kit.RFC3339(t.UpdatedAt), Status: c.Status, PublishedAt: c.PublishedAt,
		From: kit.OptString(c.From), Subject: fromGoTemplate(t.Subject), ReplyTo: c.ReplyTo, HTML: fromGoTemplate(t.HTML),
		Text: fromGoTemplate(t.Text), Variables: c.Variables}
}

func (s *API) GetTemplate(w http.ResponseWriter, r *http.Request) {
	t, err := s.resendTemplate(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	s.AnswerResend(w, r, kit.Shown(t, err, viewResendTemplate), err)
}

type resendTemplateItem struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Status      string  `json:"status"`
	PublishedAt *string `json:"published_at"`
	CreatedAt   string  `json:"created_at"`
	UpdatedAt   string  `json:"updated_at"`
	Alias       *string `json:"alias"`
}

func (s *API) ListTemplates(w http.ResponseWriter, r *http.Request) {
	ts, err := s.Reads.ListTemplates(r.Context(), kit.APIKeyFrom(r.Context()).Tenant)
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	out := kit.ResendList[resendTemplateItem]{Object: "list", Data: []resendTemplateItem{}}
	for _, t := range ts {
		v := viewResendTemplate(t)
		out.Data = append(out.Data, resendTemplateItem{ID: v.ID, Name: v.Name, Status: v.Status, PublishedAt: v.PublishedAt,
			CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt, Alias: v.Alias})
	}
	kit.WriteJSON(w, http.StatusOK, out)
}

// handleResendUpdateTemplate changes the fields given. sendonce keeps one
// version of a template: the change is live at once (Resend keeps it as a
// draft until published).
func (s *API) UpdateTemplate(w http.ResponseWriter, r *http.Request) {
	var f resendTemplateFields
	body, err := s.ReadBody(w, r)
	if err == nil {
		err = kit.DecodeStrict(body, &f)
	}
	var id string
	if err == nil {
		id, err = s.changeTemplate(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"), func(t *core.Template, c *templateCompat) error {
			if err := f.apply(t, c, s.Svc.Now()); err != nil {
				return err
			}
			return s.checkAliasFree(r.Context(), t.Tenant, t.ID, c.Alias)
		})
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, resendRef{Object: "template", ID: id})
}

// changeTemplate reads the template ident names, lets change edit a copy
// of it, and stores that in a transaction of its own (app.SaveTemplate).
// The read and the change run before it: they read the store, not the
// transaction, so holding it over them would protect nothing.
func (s *API) changeTemplate(ctx context.Context, tenant, ident string, change func(*core.Template, *templateCompat) error) (string, error) {
	found, err := s.resendTemplate(ctx, tenant, ident)
	if err != nil {
		return "", err
	}
	t := *found
	c := compatOf(&t)
	if err := change(&t, &c); err != nil {
		return "", err
	}
	if err := withCompat(&t, c); err != nil {
		return "", err
	}
	if _, err := s.Svc.SaveTemplate(ctx, &t); err != nil {
		return "", err
	}
	return t.ID, nil
}

func (s *API) RemoveTemplate(w http.ResponseWriter, r *http.Request) {
	tenant := kit.APIKeyFrom(r.Context()).Tenant
	t, err := s.resendTemplate(r.Context(), tenant, r.PathValue("id"))
	if err == nil {
		err = s.Svc.DeleteTemplate(r.Context(), tenant, t.ID)
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, kit.ResendDeleted{Object: "template", ID: t.ID, Deleted: true})
}

// handleResendPublishTemplate marks the template published. Its content
// was live already (sendonce has no drafts); the status and published_at
// are what Resend's clients read.
func (s *API) PublishTemplate(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	t, err := s.resendTemplate(ctx, key.Tenant, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	c := compatOf(t)
	now := kit.RFC3339(s.Svc.Now())
	c.Status, c.PublishedAt = "published", &now
	if err := s.putResendTemplate(ctx, tx, t, c); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, resendRef{Object: "template", ID: t.ID}, nil
}

// handleResendDuplicateTemplate copies a template under a new id, as a
// draft named "<name> (copy)" without the alias (an alias names one
// template).
func (s *API) DuplicateTemplate(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	src, err := s.resendTemplate(ctx, key.Tenant, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	c := compatOf(src)
	c.Name, c.Alias, c.Status, c.PublishedAt = c.Name+" (copy)", "", "draft", nil
	t := &core.Template{Tenant: key.Tenant, ID: app.NewID("tpl_"), Subject: src.Subject, Text: src.Text, HTML: src.HTML}
	if err := s.putResendTemplate(ctx, tx, t, c); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, resendRef{Object: "template", ID: t.ID}, nil
}

// applyTemplateDefaults fills what a send with a template leaves out from
// the template's Resend fields: from, reply_to, and the fallback values of
// variables the send does not give. sendonce's own rules then apply as to
// any send (a variable without a value or fallback is a 422).
func (s *API) applyTemplateDefaults(ctx context.Context, tenant string, e *resendEmail) error {
	t, err := s.resendTemplate(ctx, tenant, e.Template.ID)
	if errors.Is(err, core.ErrNotFound) {
		return core.Errorf(core.CodeValidation, "template", "template %q does not exist", e.Template.ID)
	}
	if err != nil {
		return err
	}
	e.Template.ID = t.ID // an alias names it too
	c := compatOf(t)
	if e.From == "" {
		e.From = c.From
	}
	if e.ReplyTo == nil {
		e.ReplyTo = c.ReplyTo
	}
	if e.Template.Variables == nil {
		e.Template.Variables = map[string]any{}
	}
	for _, v := range c.Variables {
		if _, given := e.Template.Variables[v.Key]; !given && v.FallbackValue != nil {
			e.Template.Variables[v.Key] = v.FallbackValue
		}
	}
	return nil
}
