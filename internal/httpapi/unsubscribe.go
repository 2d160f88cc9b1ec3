package httpapi

import (
	"errors"
	"html/template"
	"log/slog"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// The one-click unsubscribe link of a bulk message (RFC 8058;
// docs/deliverability.md, "One-click unsubscribe"). It is public: the
// token in the path is the credential, and it names one recipient of one
// send. GET only shows a page with a button, because link scanners fetch
// every URL of a message; the mailbox provider's POST (or the button's)
// unsubscribes.

// maxUnsubscribeBody bounds the POST body: the one-click body is 26 bytes.
const maxUnsubscribeBody = 8 << 10

var unsubscribePage = template.Must(template.New("unsubscribe").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;line-height:1.5}button{font-size:1rem;padding:.5rem 1rem}</style>
</head><body>
<h1>{{.Title}}</h1>
<p>{{.Text}}</p>
{{if .Action}}<form method="post" action="{{.Action}}">
<input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit">Unsubscribe</button>
</form>{{end}}
</body></html>
`))

type unsubscribeView struct {
	Title, Text, Action string
}

// writeUnsubscribePage answers with the page; the token stays out of
// other sites' logs (no referrer) and out of caches.
func writeUnsubscribePage(w http.ResponseWriter, status int, v unsubscribeView) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_ = unsubscribePage.Execute(w, v)
}

var (
	unsubscribeNotFound = unsubscribeView{Title: "Link not found",
		Text: "This unsubscribe link is not valid. Check that it was copied whole."}
	unsubscribeFailed = unsubscribeView{Title: "Please try again",
		Text: "The unsubscribe could not be recorded just now. Please try again in a minute."}
)

// unsubscribeError answers a failed check or unsubscribe: 404 for a token
// that is altered or unknown, else 503 with Retry-After (the database
// could not be asked just now; logged, never shown): nothing was recorded,
// and a retry records it once.
func (s *Server) unsubscribeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, core.ErrNotFound) {
		writeUnsubscribePage(w, http.StatusNotFound, unsubscribeNotFound)
		return
	}
	s.Logger.ErrorContext(r.Context(), "unsubscribe", slog.Any("error", err))
	w.Header().Set("Retry-After", "60")
	writeUnsubscribePage(w, http.StatusServiceUnavailable, unsubscribeFailed)
}

// handleUnsubscribePage is GET /u/{token}: a page with a button, changing
// nothing.
func (s *Server) handleUnsubscribePage(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	if err := s.Svc.CheckUnsubscribe(r.Context(), token); err != nil {
		s.unsubscribeError(w, r, err)
		return
	}
	writeUnsubscribePage(w, http.StatusOK, unsubscribeView{Title: "Unsubscribe",
		Text:   "Stop receiving this sender's bulk mail (newsletters, announcements) at this address? Mail you asked for, such as receipts, still comes.",
		Action: token}) // relative: /u/{token} behind any path prefix
}

// handleUnsubscribe is POST /u/{token} with the one-click body
// List-Unsubscribe=One-Click (form-encoded or multipart, RFC 8058): 200,
// and again 200 on a repeat, which changes nothing.
func (s *Server) handleUnsubscribe(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxUnsubscribeBody)
	if err := r.ParseMultipartForm(maxUnsubscribeBody); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		writeUnsubscribePage(w, http.StatusBadRequest, unsubscribeView{Title: "Bad request",
			Text: "The request's body could not be read."})
		return
	}
	if r.PostFormValue("List-Unsubscribe") != "One-Click" {
		writeUnsubscribePage(w, http.StatusBadRequest, unsubscribeView{Title: "Bad request",
			Text: "A one-click unsubscribe sends the body List-Unsubscribe=One-Click."})
		return
	}
	if _, err := s.Svc.Unsubscribe(r.Context(), r.PathValue("token"), app.UnsubscribeViaLink); err != nil {
		s.unsubscribeError(w, r, err)
		return
	}
	writeUnsubscribePage(w, http.StatusOK, unsubscribeView{Title: "Unsubscribed",
		Text: "This address will get no more of this sender's bulk mail."})
}
