package webhooksig_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/webhooksig"
)

// The Standard Webhooks specification's example (and Svix's docs).
const (
	specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTS     = 1614265330
	specBody   = `{"test": 2432232314}`
	specSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSign_SpecVector(t *testing.T) {
	got, err := webhooksig.Sign(specSecret, specID, time.Unix(specTS, 0), []byte(specBody))
	if err != nil || got != specSig {
		t.Fatalf("Sign = %q, %v; want %q", got, err, specSig)
	}
}

func specHeaders(sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", specID)
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", sig)
	return h
}

func TestVerify(t *testing.T) {
	at := time.Unix(specTS, 0)
	other, _ := webhooksig.NewSecret()
	for _, c := range []struct {
		name   string
		secret string
		h      http.Header
		body   string
		now    time.Time
		want   error
	}{
		{"valid", specSecret, specHeaders(specSig), specBody, at, nil},
		{"one of several", specSecret, specHeaders("v1,bm9wZQ== " + specSig), specBody, at, nil},
		{"altered body", specSecret, specHeaders(specSig), specBody + " ", at, webhooksig.ErrSignature},
		{"another secret", other, specHeaders(specSig), specBody, at, webhooksig.ErrSignature},
		{"another version", specSecret, specHeaders(strings.Replace(specSig, "v1,", "v2,", 1)), specBody, at, webhooksig.ErrSignature},
		{"too old", specSecret, specHeaders(specSig), specBody, at.Add(6 * time.Minute), webhooksig.ErrTimestamp},
		{"from the future", specSecret, specHeaders(specSig), specBody, at.Add(-6 * time.Minute), webhooksig.ErrTimestamp},
		{"no signature", specSecret, specHeaders(""), specBody, at, webhooksig.ErrMissingHeaders},
		{"bad secret", "whsec_!!!", specHeaders(specSig), specBody, at, webhooksig.ErrSecret},
	} {
		if err := webhooksig.Verify(c.secret, c.h, []byte(c.body), 0, c.now); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestNewSecret_SignsAndVerifies(t *testing.T) {
	s, err := webhooksig.NewSecret()
	if err != nil || !strings.HasPrefix(s, webhooksig.SecretPrefix) {
		t.Fatalf("NewSecret = %q, %v", s, err)
	}
	h := http.Header{}
	now := time.Now()
	if err := webhooksig.SetHeaders(h, s, "evt_1", now, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := webhooksig.Verify(s, h, []byte("{}"), time.Minute, now); err != nil {
		t.Errorf("Verify of SetHeaders: %v", err)
	}
}

// FuzzVerify: any headers and body give an answer, never a panic, and
// never nil without the signature Sign made.
func FuzzVerify(f *testing.F) {
	f.Add(specID, "1614265330", specSig, specBody)
	f.Add("", "", "", "")
	f.Add(specID, "-99999999999999999999", "v1,", "x")
	f.Add(specID, "1614265330", "v1,"+strings.Repeat("A", 500)+" v1 v1,,", specBody)
	f.Fuzz(func(t *testing.T, id, ts, sig, body string) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		if webhooksig.Verify(specSecret, h, []byte(body), time.Hour, time.Unix(specTS, 0)) == nil {
			want, _ := webhooksig.Sign(specSecret, id, time.Unix(specTS, 0), []byte(body))
			if !strings.Contains(sig, strings.TrimPrefix(want, "v1,")) {
				t.Fatalf("verified a signature Sign did not make: %q", sig)
			}
		}
	})
}
