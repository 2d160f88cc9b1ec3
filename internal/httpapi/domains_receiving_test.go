package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// A domain's receiving state is one fact: the native list and the native
// read, and Resend's list and read, all say a receiving domain receives
// and a sending one does not (the native list once said false where the
// read said true, and Resend's always said disabled).
func TestDomains_ReceivingStateIsTheSameInEveryView(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		for _, d := range []map[string]any{{"domain": "recv.example", "receiving": true}, {"domain": "send.example"}} {
			if r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/domains", Key: env.AdminKey, IdemKey: "d-" + d["domain"].(string), Body: d}); r.Status != http.StatusCreated {
				t.Fatalf("add %v: %d %s", d, r.Status, r.Body)
			}
		}
		want := map[string]bool{"recv.example": true, "send.example": false}
		get := func(path string) map[string]any {
			r := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: path, Key: env.AdminKey})
			if r.Status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
			}
			return r.JSON(t)
		}
		for _, d := range get("/v1/domains")["data"].([]any) {
			m := d.(map[string]any)
			if m["receiving"] != want[m["domain"].(string)] {
				t.Errorf("GET /v1/domains: %s receiving %v, want %v", m["domain"], m["receiving"], want[m["domain"].(string)])
			}
		}
		for name, receiving := range want {
			if got := get("/v1/domains/" + name)["receiving"]; got != receiving {
				t.Errorf("GET /v1/domains/%s: receiving %v, want %v", name, got, receiving)
			}
			caps := get("/domains/" + name)["capabilities"].(map[string]any)
			if (caps["receiving"] == "enabled") != receiving {
				t.Errorf("GET /domains/%s: capabilities %v, want receiving %v", name, caps, receiving)
			}
		}
		for _, d := range get("/domains")["data"].([]any) {
			m := d.(map[string]any)
			if (m["capabilities"].(map[string]any)["receiving"] == "enabled") != want[m["name"].(string)] {
				t.Errorf("GET /domains: %s capabilities %v", m["name"], m["capabilities"])
			}
		}
	})
}
