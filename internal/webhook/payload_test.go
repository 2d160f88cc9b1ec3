package webhook

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

func TestBuild_ResendShapes(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	s := &core.Send{ID: "snd_1", From: "Acme <a@acme.test>", To: []string{"ada@example.com"}, Subject: "Hi",
		MessageID: "<snd_1@acme.test>", Tags: map[string]string{"k": "v"}, CreatedAt: at}
	for _, c := range []struct {
		ev   core.Event
		typ  string
		want string
	}{
		{core.Event{Type: core.EventSent, At: at.Add(time.Second)}, "email.sent",
			`{"type":"email.sent","created_at":"2026-12-01T09:30:01Z","data":{"email_id":"snd_1","created_at":"2026-12-01T09:30:00Z","from":"Acme \u003ca@acme.test\u003e","to":["ada@example.com"],"subject":"Hi","message_id":"\u003csnd_1@acme.test\u003e","tags":{"k":"v"}}}`},
		{core.Event{Type: core.EventBounced, At: at, Recipient: "ada@example.com", Bounce: &core.Bounce{Type: core.BouncePermanent,
			SubType: "NoEmail", Status: "5.1.1", Message: "no such user", DiagnosticCode: []string{"smtp; 550 5.1.1 no"}}}, "email.bounced",
			`{"type":"email.bounced","created_at":"2026-12-01T09:30:00Z","data":{"email_id":"snd_1","created_at":"2026-12-01T09:30:00Z","from":"Acme \u003ca@acme.test\u003e","to":["ada@example.com"],"subject":"Hi","message_id":"\u003csnd_1@acme.test\u003e","tags":{"k":"v"},"recipient":"ada@example.com","bounce":{"type":"Permanent","subType":"NoEmail","message":"no such user","status":"5.1.1","diagnosticCode":["smtp; 550 5.1.1 no"]}}}`},
		{core.Event{Type: core.EventFailed, At: at, Detail: "550 no"}, "email.failed",
			`{"type":"email.failed","created_at":"2026-12-01T09:30:00Z","data":{"email_id":"snd_1","created_at":"2026-12-01T09:30:00Z","from":"Acme \u003ca@acme.test\u003e","to":["ada@example.com"],"subject":"Hi","message_id":"\u003csnd_1@acme.test\u003e","tags":{"k":"v"},"failed":{"reason":"550 no"}}}`},
	} {
		b, err := Build(s, c.ev, c.typ)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.typ, b, c.want)
		}
		if !json.Valid(b) {
			t.Errorf("%s: not JSON", c.typ)
		}
	}
}
