package resend

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// A thread's messages are read a page at a time and without bodies: a
// thread of a dozen 8 MB messages from strangers once cost every read of
// it hundreds of megabytes. A page carries each message's preview; its
// bodies come from the message's own read.

func (s *API) ThreadEmails(w http.ResponseWriter, r *http.Request) {
	key, t, err := s.thread(r)
	ms, next, err := s.LookedUpThreadMessages(r, key, t, err)
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, kit.ResendList[kit.InboxMessageView]{Object: "list", HasMore: next != "", Data: ms})
}

func (s *API) ThreadEmail(w http.ResponseWriter, r *http.Request) {
	key, t, err := s.thread(r)
	var m kit.InboxMessageView
	if err == nil {
		m, err = s.ThreadMessage(r.Context(), key, t, r.PathValue("email"))
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	s.AuditRead(r, key, m.ID)
	kit.WriteJSON(w, http.StatusOK, m)
}
