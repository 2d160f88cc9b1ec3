package client_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/webhooksig"
)

// TestClient_Webhooks drives every webhook call against a real server and
// verifies a real delivery with VerifyWebhook.
func TestClient_Webhooks(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	c := newClient(t, env.URL, env.AdminKey, nil)
	type delivery struct {
		h    http.Header
		body []byte
	}
	got := make(chan delivery, 10)
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), b}
	}))
	defer ep.Close()

	w, err := c.CreateWebhook(ctxT(t), &client.WebhookParams{Endpoint: ep.URL, Events: []string{"email.sent"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(w.SigningSecret, "whsec_") || w.Status != "enabled" {
		t.Fatalf("created %+v", w)
	}
	if _, err := c.Send(ctxT(t), &client.SendRequest{To: []string{"ada@example.com"}, Subject: "Hi", Text: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	var d delivery
	select {
	case d = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	if err := client.VerifyWebhook(w.SigningSecret, d.h, d.body, 0); err != nil {
		t.Errorf("VerifyWebhook of a real delivery: %v", err)
	}
	if err := client.VerifyWebhook(w.SigningSecret, d.h, append(d.body, ' '), 0); !errors.Is(err, webhooksig.ErrSignature) {
		t.Errorf("VerifyWebhook of an altered body: %v, want ErrSignature", err)
	}
	stale := d.h.Clone()
	stale.Set("webhook-timestamp", "1000000000")
	if err := client.VerifyWebhook(w.SigningSecret, stale, d.body, 0); !errors.Is(err, webhooksig.ErrTimestamp) {
		t.Errorf("VerifyWebhook of a 2001 timestamp: %v, want ErrTimestamp", err)
	}

	if g, err := c.GetWebhook(ctxT(t), w.ID); err != nil || g.SigningSecret != "" || g.Endpoint != ep.URL {
		t.Errorf("GetWebhook: %+v %v (no secret, same endpoint)", g, err)
	}
	if l, err := c.ListWebhooks(ctxT(t), &client.Page{Limit: 5}); err != nil || len(l.Data) != 1 || l.HasMore {
		t.Errorf("ListWebhooks: %+v %v", l, err)
	}
	eventID := d.h.Get("webhook-id")
	var ds *client.List[client.WebhookDelivery]
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ds, err = c.ListWebhookDeliveries(ctxT(t), w.ID, nil); err == nil && len(ds.Data) == 1 && ds.Data[0].Status == "success" {
			break
		}
	}
	if err != nil || len(ds.Data) != 1 || ds.Data[0].ID != eventID || ds.Data[0].Status != "success" {
		t.Fatalf("ListWebhookDeliveries: %+v %v", ds, err)
	}
	one, err := c.GetWebhookDelivery(ctxT(t), w.ID, eventID)
	if err != nil || string(one.Payload) != string(d.body) {
		t.Errorf("GetWebhookDelivery payload %s, want the body sent %s (%v)", one.Payload, d.body, err)
	}
	as, err := c.ListWebhookAttempts(ctxT(t), w.ID, eventID, nil)
	if err != nil || len(as.Data) != 1 || as.Data[0].HTTPStatusCode != 200 {
		t.Errorf("ListWebhookAttempts: %+v %v", as, err)
	}
	rot, err := c.RotateWebhookSecret(ctxT(t), w.ID, nil)
	if err != nil || rot.SigningSecret == w.SigningSecret || !strings.HasPrefix(rot.SigningSecret, "whsec_") {
		t.Fatalf("RotateWebhookSecret: %+v %v", rot, err)
	}
	if err := c.ReplayWebhookDelivery(ctxT(t), w.ID, eventID, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case d2 := <-got:
		if d2.h.Get("webhook-id") != eventID || client.VerifyWebhook(rot.SigningSecret, d2.h, d2.body, 0) != nil {
			t.Errorf("replay: webhook-id %q, or not signed with the new secret", d2.h.Get("webhook-id"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no replayed delivery")
	}
	off := "disabled"
	if u, err := c.UpdateWebhook(ctxT(t), w.ID, &client.WebhookUpdate{Status: &off}); err != nil || u.Status != "disabled" {
		t.Errorf("UpdateWebhook: %+v %v", u, err)
	}
	bad := "ftp://example.com"
	if _, err := c.UpdateWebhook(ctxT(t), w.ID, &client.WebhookUpdate{Endpoint: &bad}); client.ErrorCode(err) != client.CodeValidation {
		t.Errorf("UpdateWebhook to ftp: %v, want a validation error", err)
	}
	if err := c.DeleteWebhook(ctxT(t), w.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetWebhook(ctxT(t), w.ID); !client.IsNotFound(err) {
		t.Errorf("GetWebhook after delete: %v, want not found", err)
	}
}
