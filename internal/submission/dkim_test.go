package submission_test

import (
	"bytes"
	"strings"
	"testing"

	msgdkim "github.com/emersion/go-msgauth/dkim"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestSubmission_DKIMSignsTheClientsMessage: a submitted message from a
// domain the tenant added reaches the relay with a DKIM signature that
// go-msgauth verifies against the published key; below the signature the
// message is the client's. A message without Message-ID and Date gets
// them (the Message-ID the send's), and nothing else.
func TestSubmission_DKIMSignsTheClientsMessage(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		dns := dnstest.Start(t, env.AddDomain(t, map[string]string{"domain": "signed.test"}))
		c := dial(t, addr, env.AdminKey)
		data := []byte("From: News <news@signed.test>\r\nTo: ann@example.com\r\nSubject: Signed\r\n" +
			"Idempotency-Key: dkim-1\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n" +
			"Content-Transfer-Encoding: 8bit\r\n\r\nSigné, ünïcødé.\r\n")
		text, err := submit(c, "news@signed.test", []string{"ann@example.com"}, data)
		if err != nil {
			t.Fatal(err)
		}
		id := sendID(t, text)
		delivered(t, env, id)
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 {
			t.Fatalf("relay got %d messages", len(msgs))
		}
		got := msgs[0].Data
		vs, err := msgdkim.VerifyWithOptions(bytes.NewReader(got), &msgdkim.VerifyOptions{LookupTXT: dns.LookupTXT})
		if err != nil || len(vs) != 1 || vs[0].Err != nil || vs[0].Domain != "signed.test" {
			t.Fatalf("verifications = %+v, %v; want one passing signature of signed.test:\n%s", vs, err, got)
		}

		v := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends/" + id, Key: env.AdminKey}).JSON(t)
		msgID, _ := v["message_id"].(string)
		_, rest, ok := bytes.Cut(got, []byte("\r\nMessage-ID: "+msgID+"\r\nDate: "))
		if !ok || !strings.HasPrefix(string(got), "DKIM-Signature:") {
			t.Fatalf("want the signature, then the added Message-ID %s and Date, first:\n%s", msgID, got)
		}
		_, client, _ := bytes.Cut(rest, []byte("\r\n"))
		want := bytes.Replace(data, []byte("Idempotency-Key: dkim-1\r\n"), nil, 1)
		if !bytes.Equal(client, want) {
			t.Errorf("below the added fields the message is not the client's:\n got %q\nwant %q", client, want)
		}
	})
}
