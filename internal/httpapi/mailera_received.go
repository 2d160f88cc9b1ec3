package httpapi

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
)

// The mailbox's received messages, Mailera style (docs/compatibility.md):
// the mailbox id in the path scopes every read.

func (s *Server) handleMailboxMessages(w http.ResponseWriter, r *http.Request) {
	f, err := receivedFilter(r)
	if err == nil && r.URL.Query().Get("mailbox_id") != "" {
		err = core.Errorf(core.CodeValidation, "mailbox_id", "the mailbox is the one in the path")
	}
	var ms []*core.ReceivedMessage
	var more bool
	if err == nil {
		f.MailboxIDs = []string{r.PathValue("id")}
		ms, more, err = s.svc.ListReceived(r.Context(), apiKeyFrom(r.Context()), f)
	}
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listPage[receivedView]{Data: make([]receivedView, 0, len(ms))}
	ids := make([]string, 0, len(ms))
	for _, m := range ms {
		out.Data = append(out.Data, viewReceived(m, false))
		ids = append(ids, m.ID)
	}
	if more {
		out.NextCursor = ms[len(ms)-1].ID
	}
	s.auditRead(r, apiKeyFrom(r.Context()), ids...)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleMailboxMessage(w http.ResponseWriter, r *http.Request) {
	m, err := s.svc.ReceivedMessage(r.Context(), apiKeyFrom(r.Context()), r.PathValue("message"))
	if err == nil && m.MailboxID != r.PathValue("id") {
		err = core.ErrNotFound
	}
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	s.auditRead(r, apiKeyFrom(r.Context()), m.ID)
	writeJSON(w, http.StatusOK, viewReceived(m, true))
}
