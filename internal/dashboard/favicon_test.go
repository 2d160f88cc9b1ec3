package dashboard_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// A browser asks every site for /favicon.ico without a session: the
// dashboard answers its icon, not a 404 in every access log.
func TestDashboard_Favicon(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	r := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/favicon.ico"})
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "image/svg+xml" || !bytes.HasPrefix(r.Body, []byte("<svg")) {
		t.Fatalf("/favicon.ico: %d %s %.40q", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
}
