package httpapi

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
)

// The mailbox's received messages, Mailera style (docs/compatibility.md):
// the mailbox id in the path scopes every read.

func (s *Server) handleMailboxMessages(w http.ResponseWriter, r *http.Request) {
	f, err := ReceivedFilter(r)
	if err == nil && r.URL.Query().Get("mailbox_id") != "" {
		err = core.Errorf(core.CodeValidation, "mailbox_id", "the mailbox is the one in the path")
	}
	f.MailboxIDs = []string{r.PathValue("id")}
	s.WriteReceivedPage(w, r, f, err)
}

func (s *Server) handleMailboxMessage(w http.ResponseWriter, r *http.Request) {
	m, err := s.Svc.ReceivedMessage(r.Context(), APIKeyFrom(r.Context()), r.PathValue("message"))
	if err == nil && m.MailboxID != r.PathValue("id") {
		err = core.ErrNotFound
	}
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	s.AuditRead(r, APIKeyFrom(r.Context()), m.ID)
	WriteJSON(w, http.StatusOK, ViewReceived(m, true))
}
