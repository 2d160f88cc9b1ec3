package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// capped is one capped resource: how to count the tenant's rows, how to
// create one, and the status of a create that fits.
type capped struct {
	resource core.Resource
	count    string // SQL counting the tenant's rows
	create   func(i int) sendoncetest.Request
	created  int
}

func cappedRoutes(env *sendoncetest.Env) []capped {
	return []capped{
		{core.ResourceTemplates, `SELECT count(*) FROM templates WHERE tenant = 'default'`, func(i int) sendoncetest.Request {
			return sendoncetest.Request{Method: "PUT", Path: fmt.Sprint("/v1/templates/t", i), Key: env.AdminKey,
				Body: map[string]string{"subject": "Hi", "text": "Hello"}}
		}, http.StatusCreated},
		{core.ResourceMailboxes, `SELECT count(*) FROM mailboxes WHERE tenant = 'default'`, func(i int) sendoncetest.Request {
			return sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey,
				Body: map[string]any{"id": fmt.Sprint("m", i), "address": fmt.Sprintf("m%d@example.com", i)}}
		}, http.StatusCreated},
		{core.ResourceDomains, `SELECT count(*) FROM domains WHERE tenant = 'default'`, func(i int) sendoncetest.Request {
			return sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: env.AdminKey,
				Body: map[string]string{"domain": fmt.Sprintf("d%d.example.com", i), "algorithm": "ed25519"}}
		}, http.StatusCreated},
		// The admin key is one of the tenant's keys already.
		{core.ResourceAPIKeys, `SELECT count(*) FROM api_keys WHERE tenant = 'default' AND revoked_at IS NULL`, func(i int) sendoncetest.Request {
			return sendoncetest.Request{Method: "POST", Path: "/api-keys", Key: env.AdminKey,
				Body: map[string]any{"name": fmt.Sprint("k", i)}}
		}, http.StatusOK},
		{core.ResourceWebhooks, `SELECT count(*) FROM webhooks WHERE tenant = 'default'`, func(i int) sendoncetest.Request {
			return sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: env.AdminKey,
				Body: map[string]any{"endpoint": fmt.Sprintf("http://127.0.0.1:9/h%d", i), "events": []string{"email.sent"}}}
		}, http.StatusCreated},
		// Only entries added by hand count (the cap never refuses a bounce's).
		{core.ResourceSuppressions, `SELECT count(*) FROM suppressions WHERE tenant = 'default' AND origin = 'manual'`, func(i int) sendoncetest.Request {
			return sendoncetest.Request{Method: "POST", Path: "/v1/suppressions", Key: env.AdminKey,
				Body: map[string]any{"email": fmt.Sprintf("s%d@example.com", i)}}
		}, http.StatusCreated},
	}
}

const capN = 3

// Concurrent creates never take a tenant past its cap: of 12 at once,
// exactly the room left succeeds, the rest get 403 limit_exceeded, and
// the database holds the cap — on both databases, whose locking differs.
func TestCaps_ConcurrentCreatesStopAtTheCap(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		caps := core.Caps{core.ResourceTemplates: capN, core.ResourceMailboxes: capN, core.ResourceDomains: capN, core.ResourceAPIKeys: capN,
			core.ResourceWebhooks: capN, core.ResourceSuppressions: capN}
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, NoWorkers: true, Caps: caps, WebhookAllowPrivate: true})
		for _, c := range cappedRoutes(env) {
			t.Run(string(c.resource), func(t *testing.T) {
				before := env.QueryInt(t, c.count)
				var (
					wg       sync.WaitGroup
					mu       sync.Mutex
					statuses = map[int]int{}
				)
				for i := range 12 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r, err := env.TryDo(c.create(i))
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							t.Errorf("create %d: %v", i, err)
							return
						}
						if r.Status == http.StatusForbidden && !isLimitExceeded(r) {
							t.Errorf("create %d: 403 %s, want limit_exceeded", i, r.Body)
						}
						statuses[r.Status]++
					}()
				}
				wg.Wait()
				room := capN - before
				if statuses[c.created] != room || statuses[http.StatusForbidden] != 12-room {
					t.Fatalf("statuses %v with room for %d, want %d × %d and %d × 403", statuses, room, room, c.created, 12-room)
				}
				if n := env.QueryInt(t, c.count); n != capN {
					t.Fatalf("%d %s stored, cap %d", n, c.resource, capN)
				}
			})
		}
	})
}

// isLimitExceeded reads the code of a native error body or the name of
// a Resend one.
func isLimitExceeded(r *sendoncetest.Response) bool {
	var b struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return r.ErrorCode() == core.CodeLimitExceeded || b.Name == core.CodeLimitExceeded
}

// At the cap, replacing a template still works (it adds no row), and
// deleting one makes room; the CLI's own service, with no caps, is the
// operator's and is not refused.
func TestCaps_UpdatesAndDeletesAtTheCap(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, Caps: core.Caps{core.ResourceTemplates: 1, core.ResourceAPIKeys: 1}})
	put := func(id, subject string) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/" + id, Key: env.AdminKey,
			Body: map[string]string{"subject": subject, "text": "Hello"}})
	}
	if r := put("a", "one"); r.Status != http.StatusCreated {
		t.Fatalf("first template: %d %s", r.Status, r.Body)
	}
	if r := put("b", "two"); r.Status != http.StatusForbidden || r.ErrorCode() != core.CodeLimitExceeded {
		t.Fatalf("second template past a cap of 1: %d %s", r.Status, r.Body)
	}
	if r := put("a", "replaced"); r.Status != http.StatusOK {
		t.Fatalf("replacing the one template at the cap: %d %s", r.Status, r.Body)
	}
	if r := env.Do(t, sendoncetest.Request{Method: "DELETE", Path: "/v1/templates/a", Key: env.AdminKey}); r.Status/100 != 2 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := put("b", "two"); r.Status != http.StatusCreated {
		t.Fatalf("a template after a delete made room: %d %s", r.Status, r.Body)
	}
	// The admin key fills the key cap; the operator's CLI path (a service
	// without caps) still creates keys.
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/api-keys", Key: env.AdminKey, Body: map[string]any{"name": "x"}}); r.Status != http.StatusForbidden {
		t.Fatalf("a key past the cap through the API: %d %s", r.Status, r.Body)
	}
	cli := app.New(env.Server.Store, app.Config{}, nil)
	if _, _, err := cli.CreateKey(t.Context(), app.NewKeyParams{Name: "operator", Scopes: []core.Scope{core.ScopeRead}}); err != nil {
		t.Fatalf("the operator's key past the tenant's cap: %v", err)
	}
}
