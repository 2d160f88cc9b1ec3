package sns

import "testing"

// FuzzParse reads arbitrary bodies posted to an SNS intake route, before
// any signature is checked (so a stranger's): each is a message of one
// of the three types or an error, never a panic, and the text its
// signature is checked over can be built from any message read.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"Type":"Notification","MessageId":"m","TopicArn":"arn:aws:sns:us-east-1:1:t","Message":"{}","Timestamp":"2026-01-01T00:00:00Z","SignatureVersion":"2","Signature":"c2ln","SigningCertURL":"https://sns.us-east-1.amazonaws.com/x.pem"}`,
		`{"Type":"SubscriptionConfirmation","Token":"t","SubscribeURL":"https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription"}`,
		`{"Type":"Notification","Subject":"s"}`, `{"Type":"Other"}`, `{}`, `null`, `[`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Parse(body)
		if err != nil {
			return
		}
		switch m.Type {
		case "Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation":
		default:
			t.Fatalf("a message of type %q was read", m.Type)
		}
		_ = m.StringToSign()
	})
}
