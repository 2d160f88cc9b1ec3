package dashboard_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

func TestSmoke(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	b := newBrowser(t, env)
	b.signIn(env.AdminKey)
	for _, p := range []string{"/", "/ui/sends", "/ui/inbox", "/ui/approvals", "/ui/keys", "/ui/domains", "/ui/templates", "/ui/audit", "/ui/templates/welcome"} {
		r := b.get(p)
		if r.Status != 200 {
			t.Errorf("%s: %d %s", p, r.Status, r.Body)
		}
	}
}
