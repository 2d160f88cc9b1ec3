package httpapi_test

import (
	"crypto/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/seslocal"
)

// Anyone with an AWS account can create a topic, subscribe sendonce's
// route to it and sign messages SNS-style: only the topics the operator
// named (--ses-sns-topic) are taken. Another topic's subscription
// confirmation or notification is 403 before anything is fetched (no
// signing certificate, no SubscribeURL) or recorded.
func TestSESIntake_OnlyNamedTopics(t *testing.T) {
	emu := seslocal.Start(t)
	f := startSNSFixture(t)
	env := sendoncetest.Start(t, f.withSES(sendoncetest.Options{}, emu.URL))
	id := sendOne(t, env)
	sesID := env.WaitStatus(t, id, 20*time.Second, core.StatusSent)["provider_message_id"].(string)
	const path = "/v1/providers/ses/events"
	other := func(m map[string]string) { m["TopicArn"] = "arn:aws:sns:eu-west-1:999999999999:ses-events" }
	// The other topic's messages are signed over their own TopicArn, as
	// SNS signs them: only the topic is wrong.
	otherSigned := func(typ, body string) []byte {
		t.Helper()
		return f.messageOn(t, "arn:aws:sns:eu-west-1:999999999999:ses-events", typ, body)
	}
	complaint := sesEvent("Complaint", sesID, "", id, map[string]any{"complaint": map[string]any{
		"complainedRecipients": []map[string]string{{"emailAddress": "ann@example.com"}}, "complaintFeedbackType": "abuse"}})
	fetched, confirmed := f.fetched.Load(), f.confirmed.Load()
	for name, msg := range map[string][]byte{
		"confirmation":           otherSigned("SubscriptionConfirmation", "You have chosen to subscribe…"),
		"notification":           otherSigned("Notification", complaint),
		"notification re-topicd": f.message(t, "Notification", "2", complaint, time.Now(), other),
	} {
		if r := postIntake(t, env, path, msg, nil); r.Status != http.StatusForbidden {
			t.Errorf("%s from another topic: %d %s; want 403", name, r.Status, r.Body)
		}
	}
	if n, c := f.fetched.Load()-fetched, f.confirmed.Load()-confirmed; n != 0 || c != 0 {
		t.Errorf("another topic's messages made sendonce fetch %d certificates and confirm %d subscriptions", n, c)
	}
	s := getSendMap(t, env, id)
	if s["status"] != "sent" || eventCount(s, "complained") != 0 {
		t.Errorf("another topic's complaint changed the send: %v, %d complained events", s["status"], eventCount(s, "complained"))
	}
	if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/suppressions/ann@example.com", Key: env.AdminKey}); r.Status != http.StatusNotFound {
		t.Errorf("another topic's complaint suppressed the address: %d %s", r.Status, r.Body)
	}

	// The named topic's own messages are still taken.
	if r := postIntake(t, env, path, f.message(t, "SubscriptionConfirmation", "2", "subscribe", time.Now(), nil), nil); r.Status != 200 || f.confirmed.Load() == confirmed {
		t.Errorf("the named topic's confirmation: %d %s", r.Status, r.Body)
	}
	if r := postIntake(t, env, path, f.message(t, "Notification", "2", complaint, time.Now(), nil), nil); r.Status != 200 || !strings.Contains(string(r.Body), "recorded") {
		t.Errorf("the named topic's complaint: %d %s", r.Status, r.Body)
	}
}

// Without --ses-sns-topic the route is off: 404, and nothing fetched.
func TestSESIntake_OffWithoutTopics(t *testing.T) {
	f := startSNSFixture(t)
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true,
		Providers: server.ProvidersConfig{SNSCertHosts: []string{f.host}, TLS: f.tls}})
	fetched, confirmed := f.fetched.Load(), f.confirmed.Load()
	for _, typ := range []string{"SubscriptionConfirmation", "Notification"} {
		r := postIntake(t, env, "/v1/providers/ses/events", f.message(t, typ, "2", sesEvent("Send", "ses-1", "", "snd_x", nil), time.Now(), nil), nil)
		if r.Status != http.StatusNotFound {
			t.Errorf("%s without --ses-sns-topic: %d %s; want 404", typ, r.Status, r.Body)
		}
	}
	if f.fetched.Load() != fetched || f.confirmed.Load() != confirmed {
		t.Errorf("the route without topics fetched: %d certificates, %d confirmations", f.fetched.Load()-fetched, f.confirmed.Load()-confirmed)
	}
}

// An event changes only the recipients it names and that the send had: a
// complaint naming ann and a stranger complains ann only (bob, named by no
// event, is not shown complained although the send is; the stranger is
// neither a recipient nor suppressed), and a Reject after the send is sent
// fails nothing.
func TestSESIntake_ChangesOnlyNamedRecipients(t *testing.T) {
	emu := seslocal.Start(t)
	f := startSNSFixture(t)
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env := sendoncetest.Start(t, f.withSES(sendoncetest.Options{Backend: b}, emu.URL))
		r := env.Send(t, rand.Text(), map[string]any{"to": []string{"ann@example.com", "bob@example.com"}, "subject": "Hello", "text": "Hi."})
		if r.Status != 200 {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		id := r.JSON(t)["id"].(string)
		sesID := env.WaitStatus(t, id, 20*time.Second, core.StatusSent)["provider_message_id"].(string)
		const path = "/v1/providers/ses/events"

		reject := sesEvent("Reject", sesID, "", id, map[string]any{"reject": map[string]any{"reason": "Bad content"}})
		if r := postIntake(t, env, path, f.message(t, "Notification", "2", reject, time.Now(), nil), nil); r.Status != 200 {
			t.Fatalf("reject: %d %s", r.Status, r.Body)
		}
		if s := getSendMap(t, env, id); s["status"] != "sent" || eventCount(s, "failed") != 0 {
			t.Errorf("a Reject after sent: status %v, %d failed events; want sent, none", s["status"], eventCount(s, "failed"))
		}

		complaint := sesEvent("Complaint", sesID, "", id, map[string]any{"complaint": map[string]any{
			"complainedRecipients":  []map[string]string{{"emailAddress": "Ann@example.com"}, {"emailAddress": "mallory@example.net"}},
			"complaintFeedbackType": "abuse"}})
		if r := postIntake(t, env, path, f.message(t, "Notification", "2", complaint, time.Now(), nil), nil); r.Status != 200 {
			t.Fatalf("complaint: %d %s", r.Status, r.Body)
		}
		s := getSendMap(t, env, id)
		if s["status"] != "complained" {
			t.Errorf("send status %v; want complained", s["status"])
		}
		got := map[string]any{}
		for _, rc := range s["recipients"].([]any) {
			m := rc.(map[string]any)
			got[m["email"].(string)] = m["status"]
		}
		if got["ann@example.com"] != "complained" || got["bob@example.com"] != "sent" || len(got) != 2 {
			t.Errorf("recipients %v; want ann complained, bob sent, no one else", got)
		}
		for addr, want := range map[string]int{"ann@example.com": 200, "mallory@example.net": 404, "bob@example.com": 404} {
			if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/suppressions/" + addr, Key: env.AdminKey}); r.Status != want {
				t.Errorf("suppression of %s: %d; want %d", addr, r.Status, want)
			}
		}
		for _, e := range s["events"].([]any) {
			if rc, _ := e.(map[string]any)["recipient"].(string); strings.Contains(rc, "mallory") || strings.Contains(rc, "bob") {
				t.Errorf("an event for a recipient the complaint did not apply to: %v", e)
			}
		}
	})
}
