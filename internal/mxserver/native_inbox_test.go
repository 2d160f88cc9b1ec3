package mxserver_test

import (
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestReceiving_NativeInboxRoutes: POST /v1/inboxes makes an address
// receive (mail for it is stored, a retry of the create replays), the
// inbox is listed and found by id or address, and once deleted its
// address answers 550 again.
func TestReceiving_NativeInboxRoutes(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		env.OwnDomain(t, "default", "support@recv.test")
		_, readKey := env.NewKey(t, app.NewKeyParams{Name: "reader", Scopes: []core.Scope{core.ScopeRead}})
		create := sendoncetest.Request{Method: "POST", Path: "/v1/inboxes", Key: env.AdminKey, IdemKey: "inbox-1",
			Body: map[string]any{"address": "Support@recv.test", "name": "Support"}}
		r := env.Do(t, create)
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		in := r.JSON(t)
		id, _ := in["id"].(string)
		if in["object"] != "inbox" || in["address"] != "support@recv.test" || id == "" || in["warning"] != nil {
			t.Fatalf("created inbox: %s", r.Body)
		}
		if again := env.Do(t, create); again.Status != http.StatusCreated || string(again.Body) != string(r.Body) {
			t.Fatalf("a retry of the create did not replay: %d %s", again.Status, again.Body)
		}
		if dup := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/inboxes", Key: env.AdminKey, IdemKey: "inbox-2",
			Body: map[string]any{"address": "support@recv.test"}}); dup.Status != http.StatusConflict {
			t.Fatalf("a second inbox at the address: %d %s, want 409", dup.Status, dup.Body)
		}
		if bad := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/inboxes", Key: env.AdminKey, IdemKey: "inbox-3",
			Body: map[string]any{}}); bad.Status != http.StatusUnprocessableEntity {
			t.Fatalf("no address: %d %s, want 422", bad.Status, bad.Body)
		}

		if err := receive(t, env.InboundAddr, "support@recv.test", []byte(plainMail)); err != nil {
			t.Fatalf("mail for the new inbox: %v", err)
		}
		if n := len(receivedList(t, env)); n != 1 {
			t.Fatalf("%d received messages, want 1", n)
		}
		_, list := get(t, env, readKey, "/v1/inboxes")
		if data, _ := list["data"].([]any); len(data) != 1 || data[0].(map[string]any)["id"] != id {
			t.Fatalf("list: %v", list)
		}
		for _, ref := range []string{id, "support@recv.test"} {
			if code, got := get(t, env, readKey, "/v1/inboxes/"+ref); code != http.StatusOK || got["id"] != id {
				t.Fatalf("get %s: %d %v", ref, code, got)
			}
		}

		del := env.Do(t, sendoncetest.Request{Method: "DELETE", Path: "/v1/inboxes/" + id, Key: env.AdminKey})
		if del.Status != http.StatusOK || del.JSON(t)["deleted"] != true {
			t.Fatalf("delete: %d %s", del.Status, del.Body)
		}
		if code, _ := get(t, env, readKey, "/v1/inboxes/"+id); code != http.StatusNotFound {
			t.Fatalf("get after delete: %d, want 404", code)
		}
		if err := receive(t, env.InboundAddr, "support@recv.test", []byte(plainMail)); smtpCode(err) != 550 {
			t.Fatalf("mail for a deleted inbox: %v, want 550", err)
		}
	})
}
