package httpapi

import (
	"testing"

	"github.com/sendonce/sendonce/internal/app"
)

// FuzzProviderEvents reads arbitrary bodies as an SES event and as a
// Resend webhook, the two readers of provider intake (a body reaches them
// once its signature verified, so whatever the provider, or a key leaked
// to a stranger, can sign): each body is an event or refused, never a
// panic; an event keeps the id it was given and names its provider, is
// never both accepted and failed, and an error yields no event.
func FuzzProviderEvents(f *testing.F) {
	for _, s := range []string{
		`{"eventType":"Bounce","mail":{"messageId":"m1","tags":{"sendonce_send_id":["snd_1"]},"commonHeaders":{"messageId":"<a@b>"}},` +
			`"bounce":{"bounceType":"Permanent","bounceSubType":"General","bouncedRecipients":[{"emailAddress":"a@b.test","status":"5.1.1","diagnosticCode":"smtp; 550"}]}}`,
		`{"notificationType":"Delivery","mail":{"messageId":"m1"},"delivery":{"recipients":["a@b.test"],"smtpResponse":"250 ok"}}`,
		`{"eventType":"Complaint","mail":{"messageId":"m1"},"complaint":{"complaintFeedbackType":"abuse","complainedRecipients":[{"emailAddress":"a@b.test"}]}}`,
		`{"eventType":"Reject","mail":{"messageId":"m1"},"reject":{"reason":"Bad content"}}`,
		`{"type":"email.bounced","data":{"email_id":"e1","to":["a@b.test"],"bounce":{"type":"Permanent","subType":"General","message":"no"}}}`,
		`{"type":"email.delivered","data":{"email_id":"e1","to":["a@b.test"],"tags":{"sendonce_send_id":"snd_1"},"headers":[{"name":"Message-ID","value":"<x@y>"}]}}`,
		`{"type":"email.failed","data":{"email_id":"e1","failed":{"reason":"quota"}}}`,
		`{}`, `null`, `[]`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	readers := map[string]func(string, []byte) (app.ProviderEvent, bool, error){"ses": parseSESEvent, "resend": parseResendEvent}
	f.Fuzz(func(t *testing.T, body []byte) {
		for provider, read := range readers {
			ev, ok, err := read("evt-1", body)
			switch {
			case err != nil && ok:
				t.Fatalf("%s: an error (%v) with an event", provider, err)
			case !ok:
				continue
			case ev.EventID != "evt-1" || ev.Provider != provider || ev.ProviderMessageID == "":
				t.Fatalf("%s: event %+v lost its id, provider or message id", provider, ev)
			case ev.Accepted && ev.Failed:
				t.Fatalf("%s: event %+v both accepted and failed", provider, ev)
			}
		}
	})
}
