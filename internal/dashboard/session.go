package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

const (
	sessionCookie = "sendonce_session"
	// signinCookie carries the sign-in form's CSRF token (double submit):
	// there is no session yet to hold it.
	signinCookie = "sendonce_signin"
	// touchEvery bounds the writes a busy session makes.
	touchEvery = time.Minute
)

func token() string { return rand.Text() }

func hashToken(t string) string {
	h := sha256.Sum256([]byte(t))
	return hex.EncodeToString(h[:])
}

func (d *Dashboard) cookie(r *http.Request, name, value string, maxAge time.Duration) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: r.TLS != nil || d.cfg.HTTPS,
		SameSite: http.SameSiteStrictMode, MaxAge: int(maxAge.Seconds())}
}

type signInData struct {
	CSRF, Next, Error string
}

func (d *Dashboard) signInPage(q *req) error {
	return d.renderSignIn(q, 0, "")
}

func (d *Dashboard) renderSignIn(q *req, status int, msg string) error {
	t := token()
	http.SetCookie(q.w, d.cookie(q.r, signinCookie, t, 30*time.Minute))
	return d.render(q, status, "signin", "Sign in", signInData{CSRF: t, Next: safeNext(q.r.FormValue("next")), Error: msg})
}

// safeNext keeps a redirect after sign-in on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return "/"
	}
	// Browsers drop tabs and newlines anywhere in a URL and read a
	// backslash as a slash, so "/\t/evil.example" is "//evil.example":
	// another site. Only visible ASCII, no backslash, is kept.
	for _, c := range next {
		if c <= ' ' || c >= 0x7f || c == '\\' {
			return "/"
		}
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

func (d *Dashboard) signIn(q *req) error {
	// Another site's form must not sign a browser in with the attacker's
	// key (login CSRF): what the victim then does, the attacker reads.
	c, err := q.r.Cookie(signinCookie)
	if err != nil || !sameOrigin(q.r) || !equal(c.Value, q.r.PostFormValue("csrf")) {
		return core.Errorf(core.CodeForbidden, "", "the sign-in form expired or its CSRF token is wrong: reload the page and try again")
	}
	key, err := d.svc.Authenticate(q.ctx(), strings.TrimSpace(q.r.PostFormValue("key")))
	if err != nil {
		if core.ErrorCode(err) == core.CodeUnauthorized {
			return d.renderSignIn(q, http.StatusUnauthorized, "That API key is not valid (unknown, revoked or mistyped).")
		}
		return err
	}
	if !key.Has(core.ScopeRead) && !key.Has(core.ScopeAdmin) {
		return d.renderSignIn(q, http.StatusForbidden, "This key may only send. Sign in with a key that has the read scope (to look) or admin (to act).")
	}
	t := token()
	now := d.svc.Now()
	s := &core.DashboardSession{ID: hashToken(t), Tenant: key.Tenant, APIKeyID: key.ID, CSRF: token(), CreatedAt: now, SeenAt: now}
	if err := d.cfg.Sessions.CreateSession(q.ctx(), s, now.Add(-d.cfg.MaxAge)); err != nil {
		return err
	}
	http.SetCookie(q.w, d.cookie(q.r, sessionCookie, t, d.cfg.MaxAge))
	http.SetCookie(q.w, d.cookie(q.r, signinCookie, "", -time.Second))
	http.Redirect(q.w, q.r, safeNext(q.r.PostFormValue("next")), http.StatusSeeOther)
	return nil
}

func (d *Dashboard) signOut(q *req) error {
	if err := d.cfg.Sessions.DeleteSession(q.ctx(), q.sess.ID); err != nil {
		return err
	}
	http.SetCookie(q.w, d.cookie(q.r, sessionCookie, "", -time.Second))
	http.Redirect(q.w, q.r, "/ui/signin", http.StatusSeeOther)
	return nil
}

// signedIn loads the session and its key into q, or answers with a
// redirect to the sign-in page and returns false.
func (d *Dashboard) signedIn(q *req) bool {
	s, key, err := d.session(q.r)
	if err != nil {
		if !errors.Is(err, errNoSession) {
			d.fail(q, err)
			return false
		}
		next := q.r.URL.Path
		if q.r.Method != http.MethodGet {
			next = "/"
		}
		http.Redirect(q.w, q.r, "/ui/signin?next="+url.QueryEscape(next), http.StatusSeeOther)
		return false
	}
	q.sess, q.key = s, key
	return true
}

var errNoSession = errors.New("no session")

func (d *Dashboard) session(r *http.Request) (*core.DashboardSession, *core.APIKey, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil, nil, errNoSession
	}
	ctx := r.Context()
	s, err := d.cfg.Sessions.Session(ctx, hashToken(c.Value))
	if errors.Is(err, core.ErrNotFound) {
		return nil, nil, errNoSession
	}
	if err != nil {
		return nil, nil, err
	}
	now := d.svc.Now()
	if now.Sub(s.SeenAt) > d.cfg.IdleTimeout || now.Sub(s.CreatedAt) > d.cfg.MaxAge {
		return nil, nil, errors.Join(errNoSession, d.cfg.Sessions.DeleteSession(ctx, s.ID))
	}
	// The key is read afresh: a revoked key ends its sessions at once.
	key, err := d.reads.APIKey(ctx, s.APIKeyID)
	if errors.Is(err, core.ErrNotFound) || (err == nil && (key.RevokedAt != nil || key.Tenant != s.Tenant)) {
		return nil, nil, errors.Join(errNoSession, d.cfg.Sessions.DeleteSession(ctx, s.ID))
	}
	if err != nil {
		return nil, nil, err
	}
	if now.Sub(s.SeenAt) > touchEvery {
		if err := d.cfg.Sessions.TouchSession(ctx, s.ID, now); err != nil {
			return nil, nil, err
		}
	}
	return s, key, nil
}

// csrfOK checks the form's token against the session's, and that the
// form was posted from this site.
func (d *Dashboard) csrfOK(q *req) bool {
	return sameOrigin(q.r) && equal(q.sess.CSRF, q.r.PostFormValue("csrf"))
}

// sameOrigin reports whether a browser-sent Origin, or else Referer, when
// there is one, is this site. (The pages' Referrer-Policy, same-origin,
// has a browser send no Referer to another site, and "Origin: null" is
// refused.)
func sameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" {
		from = r.Header.Get("Referer")
	}
	if from == "" {
		return true
	}
	u, err := url.Parse(from)
	return err == nil && u.Host != "" && u.Host == r.Host
}

func equal(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
