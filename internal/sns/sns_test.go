package sns

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The string to sign is AWS's documented example, field by field.
func TestStringToSign(t *testing.T) {
	n := &Message{Type: "Notification", MessageId: "id-1", TopicArn: "arn:t", Message: "hello", Timestamp: "2026-01-02T03:04:05.000Z"}
	if got, want := n.StringToSign(), "Message\nhello\nMessageId\nid-1\nTimestamp\n2026-01-02T03:04:05.000Z\nTopicArn\narn:t\nType\nNotification\n"; got != want {
		t.Errorf("notification without subject:\n%q\nwant\n%q", got, want)
	}
	n.Subject = "s"
	if !strings.Contains(n.StringToSign(), "MessageId\nid-1\nSubject\ns\nTimestamp\n") {
		t.Errorf("subject missing or misplaced: %q", n.StringToSign())
	}
	c := &Message{Type: "SubscriptionConfirmation", MessageId: "id-2", Token: "tok", TopicArn: "arn:t", Message: "m",
		SubscribeURL: "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription", Timestamp: "ts"}
	if got, want := c.StringToSign(), "Message\nm\nMessageId\nid-2\nSubscribeURL\nhttps://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription\nTimestamp\nts\nToken\ntok\nTopicArn\narn:t\nType\nSubscriptionConfirmation\n"; got != want {
		t.Errorf("confirmation:\n%q\nwant\n%q", got, want)
	}
}

// Certificates come only over HTTPS from SNS hosts or the added ones:
// nothing is fetched for any other URL.
func TestCertificateURLs(t *testing.T) {
	fetched := 0
	client := &http.Client{Transport: roundTrip(func(*http.Request) (*http.Response, error) {
		fetched++
		return nil, errors.New("no network in this test")
	})}
	v := New(client, []string{"127.0.0.1:8443"}, nil)
	for _, u := range []string{"http://sns.us-east-1.amazonaws.com/c.pem", "https://sns.us-east-1.amazonaws.com.evil.test/c.pem",
		"https://evil.test/c.pem", "https://sns.us-east-1.amazonaws.com:8443/c.pem", "https://127.0.0.1:9999/c.pem", "https://user@sns.us-east-1.amazonaws.com/c.pem"} {
		m := &Message{Type: "Notification", SignatureVersion: "2", Signature: "AA==", Timestamp: time.Now().UTC().Format(time.RFC3339), SigningCertURL: u}
		if err := v.Verify(context.Background(), m); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", u, err)
		}
	}
	if fetched != 0 {
		t.Errorf("%d fetches from refused hosts", fetched)
	}
	for _, u := range []string{"https://sns.us-east-1.amazonaws.com/c.pem", "https://sns.cn-north-1.amazonaws.com.cn/c.pem", "https://127.0.0.1:8443/c.pem"} {
		if _, err := v.allowedURL(u); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
