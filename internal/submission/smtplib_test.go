package submission_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// python3 finds the interpreter; CI installs it (.ci/run), elsewhere the
// test is skipped without one.
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is not installed; .ci/run installs it")
		}
		t.Skip("python3 not found: the smtplib test needs it")
	}
	return p
}

// TestSubmission_PythonSmtplib: Python's smtplib (AUTH PLAIN and AUTH
// LOGIN) submits a message with a UTF-8 subject, an 8-bit UTF-8 body and
// a binary attachment; the relay receives exactly the bytes Python sent,
// less the Idempotency-Key header, once per message.
func TestSubmission_PythonSmtplib(t *testing.T) {
	py := python3(t)
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		host, port, _ := net.SplitHostPort(addr)
		att := filepath.Join(t.TempDir(), "blob.bin")
		blob := make([]byte, 3000)
		rand.Read(blob)
		if err := os.WriteFile(att, blob, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, mech := range []string{"PLAIN", "LOGIN"} {
			out, err := exec.Command(py, "testdata/smtplib_send.py", host, port, env.AdminKey, att, mech).Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("%s: smtplib: %v\n%s", mech, err, stderr)
			}
			var res struct {
				Code    int
				Reply   string
				Message string
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%s: output %q: %v", mech, out, err)
			}
			if res.Code != 250 {
				t.Fatalf("%s: DATA answered %d %s", mech, res.Code, res.Reply)
			}
			id := sendID(t, res.Reply)
			delivered(t, env, id)
			sent, _ := base64.StdEncoding.DecodeString(res.Message)
			want := dropHeader(t, sent, "Idempotency-Key")
			var got []byte
			for _, m := range env.SMTP.Messages() {
				if bytes.Contains(m.Data, []byte(id)) || bytes.Equal(m.Data, want) {
					got = m.Data
				}
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: the relay did not receive the message byte for byte:\n got %q\nwant %q", mech, got, want)
			}
			r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends/" + id, Key: env.AdminKey})
			if v := r.JSON(t); v["subject"] != "Grüße — ünïcødé ✓" {
				t.Errorf("%s: the send's subject is %q", mech, v["subject"])
			}
		}
		if n := len(env.SMTP.Messages()); n != 2 {
			t.Errorf("relay got %d messages, want 2", n)
		}
	})
}

// dropHeader removes the one header line name: from raw (the key header
// Python wrote, which must not be delivered).
func dropHeader(t *testing.T, raw []byte, name string) []byte {
	t.Helper()
	head, body, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("no header end in %q", raw)
	}
	var keep []string
	found := false
	for _, l := range strings.Split(string(head), "\r\n") {
		if strings.HasPrefix(strings.ToLower(l), strings.ToLower(name)+":") {
			found = true
			continue
		}
		keep = append(keep, l)
	}
	if !found {
		t.Fatalf("the message has no %s header", name)
	}
	return append([]byte(strings.Join(keep, "\r\n")+"\r\n\r\n"), body...)
}
