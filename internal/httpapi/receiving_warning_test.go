package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// An inbox made on a process that runs no inbound listener says so in
// its answer (mail for it would never arrive, and a 201 alone looks like
// receiving is set up); one made where the listener runs does not.
func TestInboxes_WarnWithoutAnInboundListener(t *testing.T) {
	for _, listening := range []bool{false, true} {
		env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, Inbound: listening})
		env.OwnDomain(t, "default", "recv.example")
		r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/inboxes", Key: env.AdminKey, IdemKey: "inbox",
			Body: map[string]any{"email_address": "desk@recv.example"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("create inbox: %d %s", r.Status, r.Body)
		}
		warning, _ := r.JSON(t)["warning"].(string)
		if listening && warning != "" {
			t.Errorf("with the listener running the answer warns: %q", warning)
		}
		if !listening && !strings.Contains(warning, "--inbound-addr") {
			t.Errorf("without a listener the answer %s does not warn that mail will not arrive", r.Body)
		}
	}
}
