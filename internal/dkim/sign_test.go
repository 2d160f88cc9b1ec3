package dkim_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	msgdkim "github.com/emersion/go-msgauth/dkim"

	"github.com/sendonce/sendonce/internal/dkim"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
)

const message = "From: Ada <ada@example.test>\r\n" +
	"To: Bob <bob@example.net>\r\n" +
	"Subject: Welcome\r\n" +
	"Date: Mon, 02 Mar 2026 10:00:00 +0000\r\n" +
	"Message-ID: <welcome-42@example.test>\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: 7bit\r\n" +
	"X-Mailer: sendonce\r\n" +
	"\r\n" +
	"Hello Ada!\r\n"

// verify checks the message's signatures against the fixture DNS server,
// over the network, with go-msgauth's verifier.
func verify(t *testing.T, srv *dnstest.Server, msg []byte) []*msgdkim.Verification {
	t.Helper()
	vs, err := msgdkim.VerifyWithOptions(bytes.NewReader(msg), &msgdkim.VerifyOptions{LookupTXT: srv.LookupTXT, MaxVerifications: 5})
	if err != nil {
		t.Fatalf("VerifyWithOptions: %v", err)
	}
	if len(vs) != 1 {
		t.Fatalf("got %d verifications, want 1", len(vs))
	}
	return vs
}

// publish starts a DNS server with k's record for s1 at example.test.
func publish(t *testing.T, k *dkim.Key) *dnstest.Server {
	t.Helper()
	rec, err := k.DNSRecord("s1", "example.test")
	if err != nil {
		t.Fatal(err)
	}
	return dnstest.Start(t, rec.ZoneLine())
}

func TestSignVerifies(t *testing.T) {
	for _, alg := range []dkim.Algorithm{dkim.RSA2048, dkim.Ed25519} {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			k := testKey(t, alg)
			srv := publish(t, k)
			signed, err := dkim.Sign([]byte(message), "example.test", "s1", k)
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			if !bytes.HasSuffix(signed, []byte(message)) || !bytes.HasPrefix(signed, []byte("DKIM-Signature: ")) {
				t.Fatalf("signed message is not the DKIM-Signature followed by the original:\n%s", signed)
			}
			v := verify(t, srv, signed)[0]
			if v.Err != nil {
				t.Fatalf("signature does not verify: %v", v.Err)
			}
			if q := srv.Queries(); len(q) == 0 || q[0].Name != "s1._domainkey.example.test." || q[0].Type != "TXT" {
				t.Errorf("verifier's DNS queries = %+v", q)
			}
			if v.Domain != "example.test" {
				t.Errorf("d= %q", v.Domain)
			}
			want := []string{"From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type", "Content-Transfer-Encoding", "From"}
			if !slices.Equal(sortedCopy(v.HeaderKeys), sortedCopy(want)) {
				t.Errorf("signed headers = %v, want %v (present ones, From oversigned)", v.HeaderKeys, want)
			}
			sig := string(signed[:bytes.Index(signed, []byte("From: "))])
			for _, tag := range []string{"c=relaxed/relaxed", "d=example.test", "s=s1", "a=" + k.Type() + "-sha256"} {
				if !strings.Contains(sig, tag) {
					t.Errorf("signature lacks %s: %s", tag, sig)
				}
			}
			if strings.Contains(strings.ToLower(sig), "x-mailer") {
				t.Errorf("signature covers X-Mailer: %s", sig)
			}

			// The relaxed canonicalizations tolerate whitespace changes
			// that relays make.
			relaxed := bytes.Replace(signed, []byte("Subject: Welcome"), []byte("Subject:   Welcome"), 1)
			relaxed = bytes.Replace(relaxed, []byte("Hello Ada!\r\n"), []byte("Hello   Ada!  \r\n\r\n"), 1)
			if v := verify(t, srv, relaxed)[0]; v.Err != nil {
				t.Errorf("whitespace-only changes broke the signature: %v", v.Err)
			}

			tampered := map[string][]byte{
				"body":         bytes.Replace(signed, []byte("Hello Ada!"), []byte("Hello Eve!"), 1),
				"subject":      bytes.Replace(signed, []byte("Subject: Welcome"), []byte("Subject: Urgent"), 1),
				"added From":   bytes.Replace(signed, []byte("To: Bob"), []byte("From: eve@evil.test\r\nTo: Bob"), 1),
				"unsigned key": bytes.Replace(signed, []byte("s=s1"), []byte("s=s2"), 1),
			}
			for name, msg := range tampered {
				if v := verify(t, srv, msg)[0]; v.Err == nil {
					t.Errorf("%s: tampered message verifies", name)
				}
			}
		})
	}
}

func TestSignWrongPublishedKeyFails(t *testing.T) {
	k := testKey(t, dkim.Ed25519)
	other, err := dkim.GenerateKey(dkim.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	srv := publish(t, other)
	signed, err := dkim.Sign([]byte(message), "example.test", "s1", k)
	if err != nil {
		t.Fatal(err)
	}
	if v := verify(t, srv, signed)[0]; v.Err == nil {
		t.Error("signature verified against another key")
	}
}

func TestSignBareLF(t *testing.T) {
	k := testKey(t, dkim.Ed25519)
	srv := publish(t, k)
	lf := strings.ReplaceAll(message, "\r\n", "\n")
	signed, err := dkim.Sign([]byte(lf), "example.test", "s1", k)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bytes.ReplaceAll(signed, []byte("\r\n"), nil), []byte("\n")) {
		t.Error("signed message still has bare LF")
	}
	if v := verify(t, srv, signed)[0]; v.Err != nil {
		t.Errorf("signature over LF input does not verify: %v", v.Err)
	}
}

func TestSignHeadersPresentOnly(t *testing.T) {
	k := testKey(t, dkim.Ed25519)
	srv := publish(t, k)
	msg := "From: a@example.test\r\nCc: c@example.net\r\nCc: d@example.net\r\nList-Unsubscribe: <https://example.test/u>\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n\r\nbody\r\n"
	signed, err := dkim.Sign([]byte(msg), "example.test", "s1", k)
	if err != nil {
		t.Fatal(err)
	}
	v := verify(t, srv, signed)[0]
	if v.Err != nil {
		t.Fatal(v.Err)
	}
	want := []string{"From", "Cc", "Cc", "List-Unsubscribe", "List-Unsubscribe-Post", "From"}
	if !slices.Equal(sortedCopy(v.HeaderKeys), sortedCopy(want)) {
		t.Errorf("signed headers = %v, want %v", v.HeaderKeys, want)
	}
}

func TestSignErrors(t *testing.T) {
	k := testKey(t, dkim.Ed25519)
	tests := []struct {
		name, msg, domain, selector string
		key                         *dkim.Key
		want                        string
	}{
		{"no From", "To: b@example.net\r\n\r\nx\r\n", "example.test", "s1", k, "0 From fields"},
		{"two From", "From: a@example.test\r\nFrom: b@example.test\r\n\r\nx\r\n", "example.test", "s1", k, "2 From fields"},
		{"no header end", "From: a@example.test\r\n", "example.test", "s1", k, "no end of header"},
		{"malformed header", "From: a@example.test\r\nnot a header\r\n\r\nx\r\n", "example.test", "s1", k, "malformed header"},
		{"no key", message, "example.test", "s1", nil, "no key"},
		{"bad domain", message, "example test", "s1", k, "invalid domain"},
		{"bad selector", message, "example.test", "s_1", k, "invalid selector"},
	}
	for _, tt := range tests {
		_, err := dkim.Sign([]byte(tt.msg), tt.domain, tt.selector, tt.key)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Sign = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

func TestFromDomain(t *testing.T) {
	tests := []struct {
		msg, want string
	}{
		{message, "example.test"},
		{"From: =?utf-8?q?J=C3=BCrgen?= <j@Mail.Example.TEST>\n\nx\n", "mail.example.test"},
		{"From: j@bücher.example\r\n\r\nx\r\n", "xn--bcher-kva.example"},
	}
	for _, tt := range tests {
		got, err := dkim.FromDomain([]byte(tt.msg))
		if err != nil || got != tt.want {
			t.Errorf("FromDomain(%.30q) = %q, %v; want %q", tt.msg, got, err, tt.want)
		}
	}
	for _, bad := range []string{
		"To: b@example.net\r\n\r\nx\r\n",
		"From: a@example.test\r\nFrom: b@example.test\r\n\r\nx\r\n",
		"From: a@example.test, b@example.test\r\n\r\nx\r\n",
		"From: nobody\r\n\r\nx\r\n",
	} {
		if d, err := dkim.FromDomain([]byte(bad)); err == nil {
			t.Errorf("FromDomain(%.40q) = %q, want an error", bad, d)
		}
	}
}

func sortedCopy(s []string) []string {
	c := make([]string, len(s))
	for i, v := range s {
		c[i] = strings.ToLower(v)
	}
	slices.Sort(c)
	return c
}
