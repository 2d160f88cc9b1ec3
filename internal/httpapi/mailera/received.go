package mailera

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// The mailbox's received messages, Mailera style (docs/compatibility.md):
// the mailbox id in the path scopes every read.

func (s *API) Messages(w http.ResponseWriter, r *http.Request) {
	f, err := kit.ReceivedFilter(r)
	if err == nil && r.URL.Query().Get("mailbox_id") != "" {
		err = core.Errorf(core.CodeValidation, "mailbox_id", "the mailbox is the one in the path")
	}
	f.MailboxIDs = []string{r.PathValue("id")}
	s.WriteReceivedPage(w, r, f, err)
}

func (s *API) Message(w http.ResponseWriter, r *http.Request) {
	m, err := s.Svc.ReceivedMessage(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("message"))
	if err == nil && m.MailboxID != r.PathValue("id") {
		err = core.ErrNotFound
	}
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	s.AuditRead(r, kit.APIKeyFrom(r.Context()), m.ID)
	kit.WriteJSON(w, http.StatusOK, kit.ViewReceived(m, true))
}

// API serves Mailera's routes on the shared plumbing, wired by httpapi's
// one route table.
type API struct{ *kit.Base }
