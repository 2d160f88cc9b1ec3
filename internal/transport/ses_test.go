package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/seslocal"
)

func newTestSES(endpoint string) *SES {
	return NewSES(SESConfig{Region: "eu-west-1", AccessKeyID: "AKIDTEST", SecretAccessKey: "s3cr3t/+key", Endpoint: endpoint})
}

// The official AWS SDK sends the rendered message as raw content to the
// emulator, which takes it (parsing the very bytes) and answers its id.
func TestSES_SendsRawToTheEmulator(t *testing.T) {
	emu := seslocal.Start(t)
	s := newTestSES(emu.URL)
	rec, err := s.Submit(context.Background(), testSubmission(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	emails := emu.Emails(t)
	if len(emails) != 1 || emails[0].MessageID != rec.MessageID || rec.Provider != "ses" {
		t.Fatalf("receipt %+v, emails %+v", rec, emails)
	}
	m := emails[0]
	if m.Subject != "Your order ✓" || !strings.Contains(m.From, "shop@example.com") ||
		strings.TrimSpace(m.Body.Text) != "Thanks for your order." || !strings.Contains(m.Body.HTML, "<b>order</b>") {
		t.Errorf("the emulator took %+v", m)
	}
}

// The answer is lost after SES took the message: ambiguous (unknown), and
// the SDK did not ask again (its retries are off) — SES holds one.
func TestSES_LostAnswerIsAmbiguousAndNotRetried(t *testing.T) {
	emu := seslocal.Start(t)
	for _, f := range []faultproxy.Fault{faultproxy.Drop, faultproxy.ResetAfter, faultproxy.UnavailableAfter} {
		t.Run(f.String(), func(t *testing.T) {
			before := len(emu.Emails(t))
			px := faultproxy.Start(t, faultproxy.Options{Upstream: emu.URL, Plan: faultproxy.Always("POST", "/v2/email/outbound-emails", f)})
			_, err := newTestSES(px.URL).Submit(context.Background(), testSubmission(t, "1"))
			if ClassOf(err) != Ambiguous || Definite(err) {
				t.Fatalf("err = %v; want ambiguous", err)
			}
			if n := px.Count("POST", "/v2/email/outbound-emails"); n != 1 {
				t.Errorf("%d requests: the SDK retried", n)
			}
			if n := len(emu.Emails(t)) - before; n != 1 {
				t.Errorf("SES took %d messages", n)
			}
		})
	}
}

func TestSES_RefusedConnectionIsDefinite(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err := newTestSES("http://"+addr).Submit(context.Background(), testSubmission(t, "1"))
	if !Definite(err) || ClassOf(err) != Temporary || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("err = %v; want definite temporary", err)
	}
}

// SES's documented error answers (a REST-JSON error: x-amzn-ErrorType and
// a message), each classified.
func TestSES_ErrorAnswers(t *testing.T) {
	for _, c := range []struct {
		status   int
		code     string
		class    Class
		definite bool
	}{
		{429, "TooManyRequestsException", Temporary, true},
		{400, "LimitExceededException", Temporary, true},
		{400, "SendingPausedException", Temporary, true},
		{403, "AccessDeniedException", Temporary, true},
		{400, "MessageRejected", Permanent, true},
		{400, "MailFromDomainNotVerifiedException", Permanent, true},
		{400, "SomethingNew", Permanent, true},
		{500, "InternalFailure", Ambiguous, false},
		{503, "ServiceUnavailable", Ambiguous, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-Errortype", c.code)
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(`{"message":"test says no"}`))
		}))
		_, err := newTestSES(srv.URL).Submit(context.Background(), testSubmission(t, "1"))
		srv.Close()
		var e *Error
		if !errors.As(err, &e) || e.Class != c.class || Definite(err) != c.definite || !strings.Contains(err.Error(), c.code) {
			t.Errorf("%d %s: %v (class %v); want %v", c.status, c.code, err, ClassOf(err), c.class)
		}
	}
}

func TestParseSESURL(t *testing.T) {
	c, err := ParseSESURL("ses://AKID:s3cr3t%2F%2Bkey@eu-west-1?endpoint=http://127.0.0.1:8005&configuration_set=events")
	if err != nil || c.Region != "eu-west-1" || c.SecretAccessKey != "s3cr3t/+key" || c.Endpoint != "http://127.0.0.1:8005" || c.ConfigurationSet != "events" {
		t.Fatalf("%+v %v", c, err)
	}
	if r := c.Redacted(); strings.Contains(r, "s3cr3t") || !strings.Contains(r, "AKID:xxxxx@eu-west-1") {
		t.Errorf("redacted %q", r)
	}
	if r, _ := url.Parse(c.Redacted()); r == nil {
		t.Errorf("redacted does not parse")
	}
	if c, err := ParseSESURL("ses://us-east-1"); err != nil || c.AccessKeyID != "" {
		t.Errorf("default chain: %+v %v", c, err)
	}
	for _, in := range []string{"ses://", "ses://AKID@us-east-1", "ses://AKID:s3cr3t@", "ses://AKID:s3cr3t@us-east-1:443",
		"ses://us-east-1?endpoint=ftp://x", "ses://us-east-1?foo=1", "ses://us-east-1?configuration_set=a%20b", "ses://AKID:s3cr3t@US EAST"} {
		if _, err := ParseSESURL(in); err == nil {
			t.Errorf("ParseSESURL(%q) = nil error", in)
		} else if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ParseSESURL(%q) quotes the secret: %v", in, err)
		}
	}
}
