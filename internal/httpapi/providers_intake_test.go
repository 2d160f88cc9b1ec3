package httpapi_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/resendtest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/seslocal"
	"github.com/sendonce/sendonce/webhooksig"
)

// Amazon SNS cannot run here, so the tests build its documented wire
// format exactly (docs.aws.amazon.com/sns/latest/dg/sns-message-and-json-formats.html
// and sns-verify-signature-of-message.html): the JSON message, the string
// to sign written out field by field below (not sendonce's own function),
// an RSA signature under a certificate served over HTTPS from 127.0.0.1 by
// a server whose certificate a test CA signed — trusted only through
// ProvidersConfig.TLS (--tls-ca) and allowed only by SNSCertHosts
// (--sns-cert-host).

type snsFixture struct {
	host      string // 127.0.0.1:PORT of the HTTPS server
	key       *rsa.PrivateKey
	tls       *tls.Config
	confirmed atomic.Int32
	fetched   atomic.Int32 // signing certificate requests
}

// snsTopic is the topic the fixture's messages come from, named to the
// server by ProvidersConfig.SESSNSTopics (--ses-sns-topic).
const snsTopic = "arn:aws:sns:eu-west-1:123456789012:ses-events"

func newCert(t testing.TB, tmpl, parent *x509.Certificate, pub *rsa.PublicKey, signer *rsa.PrivateKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

// withSES is o with the ses transport at endpoint and the SNS intake
// that trusts this fixture's certificates and topic.
func (f *snsFixture) withSES(o sendoncetest.Options, endpoint string) sendoncetest.Options {
	o.Transport = "ses://AKID:secret@eu-west-1?endpoint=" + endpoint
	o.Providers = server.ProvidersConfig{SNSCertHosts: []string{f.host}, SESSNSTopics: []string{snsTopic}, TLS: f.tls}
	return o
}

// withResendIntake is o with the resend transport at host (key
// re_intake) and its event intake under secret.
func withResendIntake(o sendoncetest.Options, host, secret string) sendoncetest.Options {
	o.Transport = "resend://re_intake@" + host + "?tls=none"
	o.Providers = server.ProvidersConfig{ResendWebhookSecret: secret}
	return o
}

func startSNSFixture(t testing.TB) *snsFixture {
	t.Helper()
	caKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sendonce test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	ca := newCert(t, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	srvKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	srvCert := newCert(t, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, &srvKey.PublicKey, caKey)
	f := &snsFixture{}
	f.key, _ = rsa.GenerateKey(rand.Reader, 2048)
	signing := newCert(t, &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}, ca, &f.key.PublicKey, caKey)
	signingPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: signing.Raw})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/SimpleNotificationService-test.pem":
			f.fetched.Add(1)
			_, _ = w.Write(signingPEM)
		case "/confirm":
			f.confirmed.Add(1)
			_, _ = w.Write([]byte("<ConfirmSubscriptionResponse/>"))
		default:
			http.NotFound(w, r)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.host = strings.TrimPrefix(srv.URL, "https://")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	f.tls = &tls.Config{RootCAs: pool}
	return f
}

// message builds a signed SNS message; change lets a test alter it after
// signing.
func (f *snsFixture) message(t testing.TB, typ, version, body string, at time.Time, change func(map[string]string)) []byte {
	t.Helper()
	return f.signed(t, snsTopic, typ, version, body, at, change)
}

// messageOn builds a message of another topic, signed as SNS signs it.
func (f *snsFixture) messageOn(t testing.TB, topic, typ, body string) []byte {
	t.Helper()
	return f.signed(t, topic, typ, "2", body, time.Now(), nil)
}

func (f *snsFixture) signed(t testing.TB, topic, typ, version, body string, at time.Time, change func(map[string]string)) []byte {
	t.Helper()
	m := map[string]string{"Type": typ, "MessageId": "sns-" + rand.Text(), "TopicArn": topic,
		"Message": body, "Timestamp": at.UTC().Format("2006-01-02T15:04:05.000Z"), "SignatureVersion": version,
		"SigningCertURL": "https://" + f.host + "/SimpleNotificationService-test.pem"}
	var sts string
	if typ == "Notification" {
		m["Subject"] = "Amazon SES Email Event Notification"
		sts = "Message\n" + m["Message"] + "\nMessageId\n" + m["MessageId"] + "\nSubject\n" + m["Subject"] +
			"\nTimestamp\n" + m["Timestamp"] + "\nTopicArn\n" + m["TopicArn"] + "\nType\n" + m["Type"] + "\n"
	} else {
		m["Token"] = "token-" + rand.Text()
		m["SubscribeURL"] = "https://" + f.host + "/confirm"
		sts = "Message\n" + m["Message"] + "\nMessageId\n" + m["MessageId"] + "\nSubscribeURL\n" + m["SubscribeURL"] +
			"\nTimestamp\n" + m["Timestamp"] + "\nToken\n" + m["Token"] + "\nTopicArn\n" + m["TopicArn"] + "\nType\n" + m["Type"] + "\n"
	}
	var sig []byte
	var err error
	if version == "1" {
		h := sha1.Sum([]byte(sts))
		sig, err = rsa.SignPKCS1v15(rand.Reader, f.key, crypto.SHA1, h[:])
	} else {
		h := sha256.Sum256([]byte(sts))
		sig, err = rsa.SignPKCS1v15(rand.Reader, f.key, crypto.SHA256, h[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	m["Signature"] = base64.StdEncoding.EncodeToString(sig)
	if change != nil {
		change(m)
	}
	b, _ := json.Marshal(m)
	return b
}

// sesEvent is an SES event as configuration-set event publishing writes it.
func sesEvent(typ, sesID, messageID, sendID string, extra map[string]any) string {
	e := map[string]any{"eventType": typ, "mail": map[string]any{
		"timestamp": time.Now().UTC().Format(time.RFC3339), "source": "sender@example.com", "messageId": sesID,
		"destination": []string{"ann@example.com"}, "tags": map[string][]string{"sendonce_send_id": {sendID}},
		"commonHeaders": map[string]any{"messageId": messageID, "subject": "Hello"}}}
	for k, v := range extra {
		e[k] = v
	}
	b, _ := json.Marshal(e)
	return string(b)
}

func postIntake(t *testing.T, env *sendoncetest.Env, path string, body []byte, h map[string]string) *sendoncetest.Response {
	t.Helper()
	return env.Do(t, sendoncetest.Request{Method: "POST", Path: path, Body: body, Header: h})
}

func sendOne(t testing.TB, env *sendoncetest.Env, to ...string) string {
	t.Helper()
	rcpt := "ann@example.com"
	if len(to) > 0 {
		rcpt = to[0]
	}
	r := env.Send(t, rand.Text(), map[string]any{"to": rcpt, "subject": "Hello", "text": "Hi."})
	if r.Status != 200 {
		t.Fatalf("send: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["id"].(string)
}

func eventCount(s map[string]any, typ string) int {
	n := 0
	for _, e := range s["events"].([]any) {
		if e.(map[string]any)["type"] == typ {
			n++
		}
	}
	return n
}

// An SES attempt whose answer was lost leaves the send unknown; SES's
// Delivery event for that message (found by its Message-ID) settles it:
// sent, then delivered. Forged, stale or badly placed messages are 403 and
// change nothing.
func TestSESIntake_SettlesUnknownAndRefusesForgeries(t *testing.T) {
	emu := seslocal.Start(t)
	f := startSNSFixture(t)
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		px := faultproxy.Start(t, faultproxy.Options{Upstream: emu.URL, Plan: faultproxy.Always("POST", "/v2/email/outbound-emails", faultproxy.Drop)})
		env := sendoncetest.Start(t, f.withSES(sendoncetest.Options{Backend: b}, px.URL))
		id := sendOne(t, env)
		s := env.WaitStatus(t, id, 20*time.Second, core.StatusUnknown)
		msgID := s["message_id"].(string)
		const path = "/v1/providers/ses/events"

		// The subscription is confirmed (SignatureVersion 1).
		before := f.confirmed.Load()
		if r := postIntake(t, env, path, f.message(t, "SubscriptionConfirmation", "1", "You have chosen to subscribe…", time.Now(), nil), nil); r.Status != 200 || f.confirmed.Load() == before {
			t.Fatalf("confirmation: %d %s, confirmed %d", r.Status, r.Body, f.confirmed.Load())
		}
		delivery := sesEvent("Delivery", "ses-000000042", msgID, id, map[string]any{"delivery": map[string]any{
			"recipients": []string{"ann@example.com"}, "smtpResponse": "250 2.0.0 OK"}})
		for name, bad := range map[string][]byte{
			"altered": f.message(t, "Notification", "2", delivery, time.Now(), func(m map[string]string) { m["Message"] = strings.Replace(m["Message"], "Delivery", "Bounce", 1) }),
			"plain http": f.message(t, "Notification", "2", delivery, time.Now(), func(m map[string]string) {
				m["SigningCertURL"] = strings.Replace(m["SigningCertURL"], "https", "http", 1)
			}),
			"unknown host": f.message(t, "Notification", "2", delivery, time.Now(), func(m map[string]string) { m["SigningCertURL"] = "https://sns.evil.example.com/x.pem" }),
			"stale":        f.message(t, "Notification", "2", delivery, time.Now().Add(-2*time.Hour), nil),
			"version 3":    f.message(t, "Notification", "2", delivery, time.Now(), func(m map[string]string) { m["SignatureVersion"] = "3" }),
		} {
			if r := postIntake(t, env, path, bad, nil); r.Status != http.StatusForbidden {
				t.Errorf("%s: %d %s; want 403", name, r.Status, r.Body)
			}
		}
		if s := getSendMap(t, env, id); s["status"] != "unknown" || eventCount(s, "sent") != 0 {
			t.Fatalf("a refused message changed the send: %v", s["status"])
		}

		good := f.message(t, "Notification", "2", delivery, time.Now(), nil)
		if r := postIntake(t, env, path, good, nil); r.Status != 200 || !strings.Contains(string(r.Body), "recorded") {
			t.Fatalf("delivery: %d %s", r.Status, r.Body)
		}
		if r := postIntake(t, env, path, good, nil); r.Status != 200 || !strings.Contains(string(r.Body), "duplicate") {
			t.Fatalf("again: %d %s", r.Status, r.Body)
		}
		s = getSendMap(t, env, id)
		if s["status"] != "delivered" || eventCount(s, "sent") != 1 || eventCount(s, "delivered") != 1 ||
			s["provider"] != "ses" || s["provider_message_id"] != "ses-000000042" {
			t.Errorf("after the event: status %v, sent %d, delivered %d, provider %v %v", s["status"], eventCount(s, "sent"),
				eventCount(s, "delivered"), s["provider"], s["provider_message_id"])
		}
		if n := px.Count("POST", "/v2/email/outbound-emails"); n != 1 {
			t.Errorf("SES got %d requests: an unknown send was sent again", n)
		}
	})
}

func getSendMap(t testing.TB, env *sendoncetest.Env, id string) map[string]any {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends/" + id, Key: env.AdminKey})
	if r.Status != 200 {
		t.Fatalf("GET: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)
}

// A sent send's permanent bounce (matched by SES's id) bounces it and
// suppresses the address; an event naming another send's Message-ID that
// SES never held for it changes nothing.
func TestSESIntake_BounceAndForeignMessageID(t *testing.T) {
	emu := seslocal.Start(t)
	f := startSNSFixture(t)
	env := sendoncetest.Start(t, f.withSES(sendoncetest.Options{}, emu.URL))
	id := sendOne(t, env)
	s := env.WaitStatus(t, id, 20*time.Second, core.StatusSent)
	sesID := s["provider_message_id"].(string)
	bounce := sesEvent("Bounce", sesID, "", id, map[string]any{"bounce": map[string]any{"bounceType": "Permanent", "bounceSubType": "General",
		"bouncedRecipients": []map[string]string{{"emailAddress": "Ann@example.com", "status": "5.1.1", "diagnosticCode": "smtp; 550 5.1.1 no such user"}}}})
	if r := postIntake(t, env, "/v1/providers/ses/events", f.message(t, "Notification", "2", bounce, time.Now(), nil), nil); r.Status != 200 {
		t.Fatalf("bounce: %d %s", r.Status, r.Body)
	}
	s = getSendMap(t, env, id)
	if s["status"] != "bounced" {
		t.Errorf("status %v; want bounced", s["status"])
	}
	if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/suppressions/ann@example.com", Key: env.AdminKey}); r.Status != 200 {
		t.Errorf("suppression: %d %s", r.Status, r.Body)
	}

	// A send SES took (it has its id) named by its Message-ID with a
	// made-up SES id: matching by Message-ID is only for sends whose id
	// was never known, so the event is unmatched.
	other := sendOne(t, env, "bob@example.com")
	os := env.WaitStatus(t, other, 20*time.Second, core.StatusSent)
	forged := sesEvent("Complaint", "ses-forged", os["message_id"].(string), other, map[string]any{"complaint": map[string]any{
		"complainedRecipients": []map[string]string{{"emailAddress": "bob@example.com"}}, "complaintFeedbackType": "abuse"}})
	if r := postIntake(t, env, "/v1/providers/ses/events", f.message(t, "Notification", "2", forged, time.Now(), nil), nil); r.Status != 200 || !strings.Contains(string(r.Body), "unmatched") {
		t.Fatalf("forged: %d %s", r.Status, r.Body)
	}
	if os := getSendMap(t, env, other); os["status"] != "sent" || eventCount(os, "complained") != 0 {
		t.Errorf("the forged event changed the other send: %v", os["status"])
	}
}

func svixHeaders(t *testing.T, secret, id string, body []byte) map[string]string {
	t.Helper()
	h := http.Header{}
	if err := webhooksig.SetHeaders(h, secret, id, time.Now(), body); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"svix-id": h.Get("webhook-id"), "svix-timestamp": h.Get("webhook-timestamp"), "svix-signature": h.Get("webhook-signature")}
}

func TestResendIntake(t *testing.T) {
	secret, _ := webhooksig.NewSecret()
	rs := resendtest.Start(t, "re_intake")
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env := sendoncetest.Start(t, withResendIntake(sendoncetest.Options{Backend: b}, rs.Host, secret))
		id := sendOne(t, env)
		s := env.WaitStatus(t, id, 20*time.Second, core.StatusSent)
		emailID := s["provider_message_id"].(string)
		const path = "/v1/providers/resend/events"
		body := []byte(`{"type":"email.delivered","created_at":"2026-12-01T10:00:00.000Z","data":{"email_id":"` + emailID +
			`","from":"sender@example.com","to":["ann@example.com"],"subject":"Hello","created_at":"2026-12-01T09:59:59.000Z"}}`)
		svixID := "msg_" + rand.Text()
		h := svixHeaders(t, secret, svixID, body)
		bad := svixHeaders(t, "whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret, not the one")), svixID, body)
		if r := postIntake(t, env, path, body, bad); r.Status != http.StatusForbidden {
			t.Errorf("wrong secret: %d; want 403", r.Status)
		}
		if r := postIntake(t, env, path, []byte(strings.Replace(string(body), "delivered", "bounced", 1)), h); r.Status != http.StatusForbidden {
			t.Errorf("altered body: %d; want 403", r.Status)
		}
		if r := postIntake(t, env, path, body, nil); r.Status != http.StatusForbidden {
			t.Errorf("unsigned: %d; want 403", r.Status)
		}
		if s := getSendMap(t, env, id); s["status"] != "sent" {
			t.Fatalf("a refused webhook changed the send: %v", s["status"])
		}
		for _, want := range []string{"recorded", "duplicate"} {
			if r := postIntake(t, env, path, body, h); r.Status != 200 || !strings.Contains(string(r.Body), want) {
				t.Fatalf("delivered: %d %s; want %s", r.Status, r.Body, want)
			}
		}
		s = getSendMap(t, env, id)
		if s["status"] != "delivered" || eventCount(s, "delivered") != 1 {
			t.Errorf("status %v, %d delivered events", s["status"], eventCount(s, "delivered"))
		}
		if !slices.ContainsFunc(s["recipients"].([]any), func(r any) bool { return r.(map[string]any)["status"] == "delivered" }) {
			t.Errorf("recipients %v", s["recipients"])
		}
	})
}

// A mailbox may use a provider; its credentials are never shown back, and
// a tenant's ses:// must carry its own (the SDK's default chain is the
// operator's account).
func TestMailboxProviderTransport(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	create := func(id, tr string) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: rand.Text(),
			Body: map[string]any{"id": id, "address": id + "@example.com", "transport": tr}})
	}
	if r := create("ses-default-chain", "ses://eu-west-1"); r.Status != 422 {
		t.Errorf("ses:// without credentials: %d %s", r.Status, r.Body)
	}
	if r := create("bad", "resend://"); r.Status != 422 {
		t.Errorf("resend:// without a key: %d %s", r.Status, r.Body)
	}
	for id, tr := range map[string]string{"ses": "ses://AKID:sup3rs3cret@eu-west-1", "resend": "resend://re_sup3rs3cret@"} {
		r := create(id, tr)
		if r.Status != 201 || strings.Contains(string(r.Body), "sup3rs3cret") || !strings.Contains(string(r.Body), "xxxxx") {
			t.Errorf("%s: %d %s", id, r.Status, r.Body)
		}
	}
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/mailboxes", Key: env.AdminKey})
	if strings.Contains(string(r.Body), "sup3rs3cret") {
		t.Errorf("GET /v1/mailboxes shows a credential: %s", r.Body)
	}
}

// A worker that died mid-attempt leaves an unknown send and no record of
// its handoff; SES's Send event, naming the send by its Message-ID and
// send id tag, settles it as sent. Without the tag, or with another send's
// tag, it is unmatched.
func TestSESIntake_SettlesAnUnknownLeftByADeadWorker(t *testing.T) {
	f := startSNSFixture(t)
	env := sendoncetest.Start(t, f.withSES(sendoncetest.Options{NoWorkers: true}, "http://127.0.0.1:1"))
	id := sendOne(t, env)
	ctx := t.Context()
	if err := env.Server.Store.InTx(ctx, func(tx core.Tx) error {
		s, err := tx.SendForUpdate(ctx, id)
		if err != nil {
			return err
		}
		s.Status, s.AttemptToken = core.StatusUnknown, "dead-worker-token"
		return tx.UpdateSend(ctx, s)
	}); err != nil {
		t.Fatal(err)
	}
	msgID := getSendMap(t, env, id)["message_id"].(string)
	post := func(sendTag string) string {
		ev := sesEvent("Send", "ses-dead-"+sendTag, msgID, sendTag, nil)
		r := postIntake(t, env, "/v1/providers/ses/events", f.message(t, "Notification", "2", ev, time.Now(), nil), nil)
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		return string(r.Body)
	}
	if b := post("snd_someoneelse"); !strings.Contains(b, "unmatched") {
		t.Errorf("another send's tag: %s", b)
	}
	if b := post(id); !strings.Contains(b, "recorded") {
		t.Errorf("its own tag: %s", b)
	}
	if s := getSendMap(t, env, id); s["status"] != "sent" || s["provider_message_id"] != "ses-dead-"+id {
		t.Errorf("status %v, provider id %v", s["status"], s["provider_message_id"])
	}
}

// A permanent bounce Resend reports suppresses the recipient whatever its
// subtype (Resend, like SES, advises removing the address): with subtype
// General and a 5.1.1 in its message, the next send to it is refused
// instead of bouncing again. A transient one never suppresses.
func TestResendIntake_PermanentBounceSuppresses(t *testing.T) {
	secret, _ := webhooksig.NewSecret()
	rs := resendtest.Start(t, "re_intake")
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env := sendoncetest.Start(t, withResendIntake(sendoncetest.Options{Backend: b}, rs.Host, secret))
		bounce := func(to, typ string) {
			r := env.Send(t, rand.Text(), map[string]any{"to": to, "subject": "Hello", "text": "hi"})
			if r.Status != 200 {
				t.Fatalf("send to %s: %d %s", to, r.Status, r.Body)
			}
			id, _ := r.JSON(t)["id"].(string)
			emailID := env.WaitStatus(t, id, 20*time.Second, core.StatusSent)["provider_message_id"].(string)
			body := []byte(`{"type":"email.bounced","created_at":"2026-12-01T10:00:00.000Z","data":{"email_id":"` + emailID +
				`","from":"sender@example.com","to":["` + to + `"],"subject":"Hello","created_at":"2026-12-01T09:59:59.000Z",` +
				`"bounce":{"type":"` + typ + `","subType":"General","message":"550 5.1.1 The email account that you tried to reach does not exist"}}}`)
			if r := postIntake(t, env, "/v1/providers/resend/events", body, svixHeaders(t, secret, "msg_"+rand.Text(), body)); r.Status != 200 {
				t.Fatalf("bounce event: %d %s", r.Status, r.Body)
			}
		}
		bounce("gone@example.com", "Permanent")
		bounce("busy@example.com", "Transient")
		if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/suppressions/gone@example.com", Key: env.AdminKey}); r.Status != 200 ||
			!strings.Contains(string(r.Body), `"bounce"`) {
			t.Errorf("the permanently bounced address: %d %s, want suppressed with origin bounce", r.Status, r.Body)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/suppressions/busy@example.com", Key: env.AdminKey}); r.Status != 404 {
			t.Errorf("the transiently bounced address: %d %s, want not suppressed", r.Status, r.Body)
		}
	})
}
