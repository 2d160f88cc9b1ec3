package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/webhook"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Sessions stores dashboard sessions (sqlstore.Store implements it).
type Sessions interface {
	// CreateSession stores s and deletes sessions created before
	// expiredBefore.
	CreateSession(ctx context.Context, s *core.DashboardSession, expiredBefore time.Time) error
	// Session returns the session with that id; core.ErrNotFound.
	Session(ctx context.Context, id string) (*core.DashboardSession, error)
	TouchSession(ctx context.Context, id string, at time.Time) error
	DeleteSession(ctx context.Context, id string) error
}

// Stats counts sends for the overview (sqlstore.Store implements it).
type Stats interface {
	// DailySendCounts counts the sends created since since by UTC day
	// and status; apiKeyID "" is every key's.
	DailySendCounts(ctx context.Context, tenant, apiKeyID string, since time.Time) ([]core.DaySendCount, error)
	CountSendsInStatus(ctx context.Context, tenant, apiKeyID string, statuses ...core.Status) (map[core.Status]int, error)
}

// Defaults of Config.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultMaxAge      = 12 * time.Hour
	DefaultLivePoll    = time.Second
)

// Config holds what the dashboard needs.
type Config struct {
	// Service makes every change but the webhooks' (and authenticates).
	Service *app.Service
	// Reads serves the pages' reads (core.Store implements it).
	Reads    Reads
	Sessions Sessions
	// Webhooks makes the webhook pages' changes (the API's webhook.Service).
	Webhooks *webhook.Service
	Stats    Stats
	// Metrics, when set, gives the overview its duplicates-prevented
	// counts.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// IdleTimeout ends a session unused this long; MaxAge ends any session
	// this long after sign-in. Defaults: DefaultIdleTimeout, DefaultMaxAge.
	IdleTimeout, MaxAge time.Duration
	// LivePoll is how often live lists look for changes. Defaults to
	// DefaultLivePoll.
	LivePoll time.Duration
	// Destinations, when set, reports the mx destinations this process
	// handed a tenant's sends to (the destinations page).
	Destinations func(tenant string) []Destination
	// HTTPS says browsers reach the dashboard over https even when the
	// request arrives in plain HTTP from a TLS-terminating proxy
	// (--public-url https://…): its cookies are then Secure and its
	// answers carry Strict-Transport-Security.
	HTTPS bool
}

// Dashboard is the web dashboard's http.Handler.
type Dashboard struct {
	cfg   Config
	svc   *app.Service
	hooks *webhook.Service
	idem  *idempotency.Engine
	reads Reads
	log   *slog.Logger
	mux   *http.ServeMux
	pages map[string]*template.Template
	// done ends the live streams (Close): an http.Server's Shutdown waits
	// for them otherwise.
	done      chan struct{}
	closeOnce sync.Once
}

// Close ends the event streams of live lists; pages are still served.
// Call it before shutting the HTTP server down (http.Server's
// RegisterOnShutdown).
func (d *Dashboard) Close() { d.closeOnce.Do(func() { close(d.done) }) }

// New returns the dashboard. It panics if its embedded templates do not
// parse or cfg lacks Service or Reads (wiring mistakes, caught by every
// test).
func New(cfg Config) *Dashboard {
	if cfg.Service == nil || cfg.Reads == nil {
		panic("dashboard: Config needs Service and Reads")
	}
	defaults.Set(&cfg.IdleTimeout, DefaultIdleTimeout)
	defaults.Set(&cfg.MaxAge, DefaultMaxAge)
	defaults.Set(&cfg.LivePoll, DefaultLivePoll)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dashboard{cfg: cfg, svc: cfg.Service, hooks: cfg.Webhooks, idem: cfg.Service.Idempotency(), reads: cfg.Reads, log: cfg.Logger,
		mux: http.NewServeMux(), done: make(chan struct{})}
	d.pages = parsePages()
	for _, rt := range routes {
		d.mux.Handle(rt.pattern, d.handle(rt))
	}
	return d
}

// parsePages parses each page with the layout and the partials.
func parsePages() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/_*.html"))
	names, err := fs.Glob(templateFS, "templates/[a-z]*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		t := template.Must(template.Must(base.Clone()).ParseFS(templateFS, n))
		pages[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return pages
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"whenp": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"join":          strings.Join,
	"threadActions": threadActions,
	"frame": func(src string, remote bool) map[string]any {
		// The heading's id comes from the source: a thread shows several
		// frames on one page, and ids must not repeat.
		id := "h-html" + strings.NewReplacer("/", "-", "_", "-").Replace(strings.TrimSuffix(strings.TrimPrefix(src, "/ui"), "/html"))
		if remote {
			src += "?remote=1"
		}
		return map[string]any{"Src": src, "Remote": remote, "ID": id}
	},
}

// The Content-Security-Policy of every page: nothing but the dashboard's
// own script, styles and frames; no inline script or style at all.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"frame-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP serves the dashboard.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with forms, which csrfOK refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	if d.cfg.HTTPS {
		// A year, the common floor; no includeSubDomains, which would bind
		// the operator's other hosts.
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	d.mux.ServeHTTP(w, r)
}

// req is one request with its signed-in key.
type req struct {
	w    http.ResponseWriter
	r    *http.Request
	key  *core.APIKey
	sess *core.DashboardSession
}

func (q *req) ctx() context.Context { return q.r.Context() }

// admin reports whether the key may act (and so sees the actions).
func (q *req) admin() bool { return q.key != nil && q.key.Has(core.ScopeAdmin) }

func (d *Dashboard) handle(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := &req{w: w, r: r}
		if rt.scope != "" {
			if !d.signedIn(q) {
				return
			}
			if !q.key.Has(rt.scope) {
				d.fail(q, core.Errorf(core.CodeForbidden, "", "this API key lacks the %q scope this page needs", rt.scope))
				return
			}
			if r.Method == http.MethodPost && !d.csrfOK(q) {
				d.fail(q, core.Errorf(core.CodeForbidden, "", "the form's CSRF token is missing or wrong: reload the page and try again"))
				return
			}
		}
		if err := rt.h(d, q); err != nil {
			d.fail(q, err)
		}
	})
}

// page is what the layout renders around a page's content.
type page struct {
	Title string
	Nav   []navItem
	Here  string
	Key   *core.APIKey
	Admin bool
	CSRF  string
	Data  any
}

// render writes a page; status 0 is 200.
func (d *Dashboard) render(q *req, status int, name, title string, data any) error {
	t, ok := d.pages[name]
	if !ok {
		return fmt.Errorf("dashboard: no page %q", name)
	}
	p := page{Title: title, Here: q.r.URL.Path, Key: q.key, Admin: q.admin(), Data: data}
	if q.sess != nil {
		p.CSRF = q.sess.CSRF
	}
	for _, n := range nav {
		if q.key != nil && q.key.Has(n.scope) {
			p.Nav = append(p.Nav, n)
		}
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	q.w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if status == 0 {
		status = http.StatusOK
	}
	q.w.WriteHeader(status)
	_, err := q.w.Write(buf.Bytes())
	return err
}

// fail answers err as an error page: the API's statuses for the same codes.
func (d *Dashboard) fail(q *req, err error) {
	status, msg := http.StatusInternalServerError, "Something went wrong on the server; the log has the details."
	var e *core.Error
	if errors.As(err, &e) {
		msg = e.Message
		switch e.Code {
		case core.CodeNotFound:
			status, msg = http.StatusNotFound, "There is no such page, or it belongs to another tenant."
		case core.CodeValidation, core.CodeInvalidJSON, core.CodeTemplateMissingVar:
			status = http.StatusBadRequest
		case core.CodeInvalidState, core.CodeConflict:
			status = http.StatusConflict
		case core.CodeForbidden:
			status = http.StatusForbidden
		case core.CodeUnauthorized:
			status = http.StatusUnauthorized
		case core.CodeRateLimited:
			status = http.StatusTooManyRequests
		case core.CodeUnavailable:
			status = http.StatusServiceUnavailable
		default:
			status, msg = http.StatusInternalServerError, "Something went wrong on the server; the log has the details."
		}
	}
	if status >= 500 {
		d.log.ErrorContext(q.ctx(), "dashboard", slog.String("path", q.r.URL.Path), slog.Any("err", err))
	}
	if rerr := d.render(q, status, "error", http.StatusText(status), msg); rerr != nil {
		d.log.ErrorContext(q.ctx(), "dashboard error page", slog.Any("err", rerr))
	}
}

// favicon answers the browser's /favicon.ico with the dashboard's icon
// (an SVG, which browsers take there too) rather than a 404 in every log.
func (d *Dashboard) favicon(q *req) error { return d.serveAsset(q, "icon.svg") }

// asset serves an embedded file; they change only with the binary.
func (d *Dashboard) asset(q *req) error { return d.serveAsset(q, q.r.PathValue("file")) }

func (d *Dashboard) serveAsset(q *req, name string) error {
	b, err := assetFS.ReadFile("assets/" + name)
	if err != nil {
		return core.ErrNotFound
	}
	ct := "application/octet-stream"
	switch {
	case strings.HasSuffix(name, ".css"):
		ct = "text/css; charset=utf-8"
	case strings.HasSuffix(name, ".js"):
		ct = "text/javascript; charset=utf-8"
	case strings.HasSuffix(name, ".svg"):
		ct = "image/svg+xml"
	}
	q.w.Header().Set("Content-Type", ct)
	q.w.Header().Set("Cache-Control", "public, max-age=3600")
	_, err = q.w.Write(b)
	return err
}
