package dashboard_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// A search for a whole address finds its sends by the recipient index,
// older than the newest sends a text search reads (searchScan, 10,000).
func TestDashboard_SearchByAddressFindsOldSends(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	ctx := context.Background()
	now := env.Clock.Now()
	send := func(id, to string) *core.Send {
		return &core.Send{ID: id, Tenant: "default", MailboxID: "default", Status: core.StatusSent, From: "me@example.com",
			To: []string{to}, Subject: "s " + id, MessageID: "<" + id + "@example.com>", CreatedAt: now, UpdatedAt: now}
	}
	err := env.Server.Store.InTx(ctx, func(tx core.Tx) error {
		if err := tx.InsertSend(ctx, send("snd_00000old", `"Ada" <ada@example.com>`)); err != nil {
			return err
		}
		for i := range 10_001 {
			if err := tx.InsertSend(ctx, send(fmt.Sprintf("snd_1%07d", i), "bob@example.com")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	br := newBrowser(t, env)
	br.signIn(env.AdminKey)
	p := br.get("/ui/sends?q=" + url.QueryEscape("Ada@Example.com"))
	if !strings.Contains(p.Body, "snd_00000old") || strings.Contains(p.Body, "snd_1") {
		t.Errorf("the search for ada@example.com does not find her one send, older than 10,000 others (status %d)", p.Status)
	}
	if strings.Contains(p.Body, "older ones may match too") {
		t.Errorf("the search by address says it read only the newest sends")
	}
}
