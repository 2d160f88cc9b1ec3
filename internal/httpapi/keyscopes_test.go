package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestCreateKey_ScopesWithinTheCreators: a key gives a new key no scope it
// lacks (a read,admin key once minted a send key through POST /api-keys):
// 403, and no key is made; a scope it has is given.
func TestCreateKey_ScopesWithinTheCreators(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true, NoWorkers: true})
	_, readAdmin := env.NewKey(t, app.NewKeyParams{Name: "read-admin", Scopes: []core.Scope{core.ScopeRead, core.ScopeAdmin}})
	do := func(body map[string]any) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/api-keys", Key: readAdmin, Body: body})
	}
	for _, permission := range []string{"sending_access", "full_access", ""} {
		body := map[string]any{"name": "minted"}
		if permission != "" {
			body["permission"] = permission
		}
		if r := do(body); r.Status != http.StatusForbidden {
			t.Errorf("a read,admin key asking for %q: %d %s, want 403", permission, r.Status, r.Body)
		}
	}
	list := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/api-keys", Key: readAdmin}).JSON(t)
	for _, k := range list["data"].([]any) {
		if k.(map[string]any)["name"] == "minted" {
			t.Errorf("a refused key was made: %v", k)
		}
	}
	// The admin key, which has every scope, still makes both kinds.
	for _, permission := range []string{"sending_access", "full_access"} {
		r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/api-keys", Key: env.AdminKey, Body: map[string]any{"name": "ok", "permission": permission}})
		if r.Status != http.StatusOK {
			t.Errorf("the admin key asking for %s: %d %s", permission, r.Status, r.Body)
		}
	}
}
