package submission_test

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/submission"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

const nodemailerDir = "testdata/nodemailer"

// nodemailer returns node's path once node and the pinned Nodemailer are
// installed; without them it skips locally and fails in CI.
func nodemailer(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(nodemailerDir, "node_modules", "nodemailer", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Nodemailer test cannot run: %v (.ci/run installs it: npm ci --prefix internal/submission/%s)", err, nodemailerDir)
		}
		t.Skipf("needs node and `npm ci --prefix internal/submission/%s`: %v", nodemailerDir, err)
	}
	return node
}

// clientReply is what a client script printed: the server's reply to DATA.
type clientReply struct {
	OK           bool   `json:"ok"`
	Code         int    `json:"code"`
	ResponseCode int    `json:"responseCode"`
	Response     string `json:"response"`
	Reply        string `json:"reply"`
}

func runClient(t *testing.T, name string, args ...string) clientReply {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr)
	}
	var r clientReply
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%s printed %q: %v", name, out, err)
	}
	return r
}

// retryReplays submits one logical message twice through a real client
// that builds it anew each time (send), and checks that the retry is the
// first acceptance replayed: the same send named, one send under the key,
// one message at the relay.
func retryReplays(t *testing.T, env *sendoncetest.Env, key string, send func() (ok bool, text string)) {
	t.Helper()
	ok, first := send()
	if !ok || !strings.Contains(first, "queued as snd_") {
		t.Fatalf("first try: %q, want 250 queued", first)
	}
	id := sendID(t, first)
	ok, again := send()
	if !ok || !strings.Contains(again, "already accepted as "+id) {
		t.Fatalf("the client's retry, rebuilt: %q, want 250 naming %s (the first acceptance replayed)", again, id)
	}
	if n := sendsOf(t, env, key); n != 1 {
		t.Errorf("%d sends under %q, want 1", n, key)
	}
	delivered(t, env, id)
	if n := len(env.SMTP.Messages()); n != 1 {
		t.Errorf("the relay got %d messages, want 1", n)
	}
}

// A Nodemailer app retrying sendMail (its reply lost, say) builds the
// message again: a new Date, new boundaries, a new Message-ID unless the
// app set one. With the same Idempotency-Key header, or the README's fixed
// messageId, the retry replays the first acceptance instead of being
// refused for good.
func TestSubmission_NodemailerRetryReplays(t *testing.T) {
	node := nodemailer(t)
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		for _, tc := range []struct{ kind, key, stored string }{
			{"header", "order-1042-receipt", "order-1042-receipt"},
			{"message-id", "<order-1042-receipt@example.com>", "order-1042-receipt@example.com"},
		} {
			t.Run(tc.kind, func(t *testing.T) {
				env, addr := startEnv(t, b)
				host, port, _ := net.SplitHostPort(addr)
				retryReplays(t, env, tc.stored, func() (bool, string) {
					r := runClient(t, node, filepath.Join(nodemailerDir, "send.mjs"), host, port, env.AdminKey, tc.kind, tc.key)
					if !r.OK {
						return false, r.Response
					}
					return true, r.Response
				})
			})
		}
	})
}

// Python's smtplib with a multipart message (text, HTML, an attachment),
// retried: Python's generator draws new boundaries and the app a new Date
// and Message-ID; the same Idempotency-Key replays.
func TestSubmission_SmtplibMultipartRetryReplays(t *testing.T) {
	py := python3(t)
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		host, port, _ := net.SplitHostPort(addr)
		retryReplays(t, env, "py-order-1042", func() (bool, string) {
			r := runClient(t, py, "testdata/smtplib_retry.py", host, port, env.AdminKey, "py-order-1042")
			return r.Code == 250, r.Reply
		})
	})
}

// A key accepted before fingerprints covered what a message says holds
// the bytes fingerprint: a retry across the upgrade with the same bytes
// replays it (no second send), and one with other content is refused
// naming that send.
func TestSubmission_KeyFromBeforeTheNewFingerprintReplaysItsBytes(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		c := dial(t, addr, env.AdminKey)
		to := []string{"ann@example.com"}
		data := mail(newMsgID(), "Accepted before the upgrade.", "Idempotency-Key: order-upgrade")
		sc := idempotency.Scope{Tenant: "default", Method: "SMTP", Route: "submission", Key: "order-upgrade"}
		stored := dropHeader(t, data, "Idempotency-Key") // what older versions fingerprinted
		putPlain(t, env, sc, submission.LegacyFingerprint("sender@example.com", to, stored), `{"id":"snd_01accepted0before0upgrade"}`)

		text, err := submit(c, "sender@example.com", to, data)
		if err != nil || !strings.Contains(text, "already accepted as snd_01accepted0before0upgrade") {
			t.Fatalf("the same bytes after the upgrade: %q %v, want the first acceptance replayed", text, err)
		}
		_, err = submit(c, "sender@example.com", to, mail(newMsgID(), "Other content.", "Idempotency-Key: order-upgrade"))
		if code(err) != 554 || !strings.Contains(err.Error(), "snd_01accepted0before0upgrade") {
			t.Fatalf("other content under the old key: %v, want 554 naming the send that holds it", err)
		}
		if n := sendsOf(t, env, "order-upgrade"); n != 0 {
			t.Fatalf("%d sends made, want none", n)
		}
	})
}
