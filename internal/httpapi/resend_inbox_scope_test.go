package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestResendInboxes_OthersThreadsAndDraftsAreNotFound: Resend's inbox
// routes reach a thread or a draft only through its own inbox. Named
// through another inbox of the same tenant it does not exist (404), to a
// read and to a change alike, and the change is not made; through its own
// inbox it is there.
func TestResendInboxes_OthersThreadsAndDraftsAreNotFound(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env, inbox, rcv := draftEnv(t, b)
		other := env.NewInbox(t, "default", "desk@other.example", "Desk")
		draft := createDraft(t, env, env.AdminKey, "scope-1", map[string]any{"in_reply_to": rcv.ID, "text": "Answer"})["id"].(string)
		do := func(method, inboxID, rest string) int {
			t.Helper()
			return env.Do(t, sendoncetest.Request{Method: method, Path: "/inboxes/" + inboxID + rest, Key: env.AdminKey}).Status
		}
		for _, c := range []struct{ method, rest string }{
			{http.MethodGet, "/threads/" + rcv.ThreadID},
			{http.MethodGet, "/threads/" + rcv.ThreadID + "/emails"},
			{http.MethodGet, "/threads/" + rcv.ThreadID + "/emails/" + rcv.ID},
			{http.MethodDelete, "/threads/" + rcv.ThreadID},
			{http.MethodGet, "/drafts/" + draft},
			{http.MethodDelete, "/drafts/" + draft},
		} {
			if got := do(c.method, other.ID, c.rest); got != http.StatusNotFound {
				t.Errorf("%s %s through another inbox: %d, want 404", c.method, c.rest, got)
			}
		}
		for _, rest := range []string{"/threads/" + rcv.ThreadID, "/drafts/" + draft} {
			if got := do(http.MethodGet, inbox.ID, rest); got != http.StatusOK {
				t.Errorf("GET %s through its own inbox: %d, want 200", rest, got)
			}
		}
	})
}
