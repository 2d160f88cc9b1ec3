package httpapi_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// nodeSDKDir holds the Node test: package.json pins the official `resend`
// package, package-lock.json its tree; .ci/run installs it with npm ci.
const nodeSDKDir = "testdata/resend-node"

// TestResendNodeSDK runs resend.test.mjs (the official Resend Node SDK,
// with only RESEND_BASE_URL changed) against a server on each backend.
// Without node or the installed node_modules it skips locally and fails in
// CI, where .ci/run installs them.
func TestResendNodeSDK(t *testing.T) {
	runNodeSDK(t, "resend.test.mjs", sendoncetest.Options{NoWorkers: true})
}

// TestResendNodeSDKEmails runs emails.test.mjs: emails.send with
// attachments and scheduledAt, get, list, update, cancel, and batches
// strict and permissive.
func TestResendNodeSDKEmails(t *testing.T) {
	runNodeSDK(t, "emails.test.mjs", sendoncetest.Options{NoWorkers: true})
}

// TestResendNodeSDKWebhooks runs webhooks.test.mjs: the SDK's webhooks.*
// calls and webhooks.verify on a real delivery to an endpoint the Node
// test serves on 127.0.0.1 (so workers run, and loopback is allowed).
func TestResendNodeSDKWebhooks(t *testing.T) {
	runNodeSDK(t, "webhooks.test.mjs", sendoncetest.Options{})
}

func runNodeSDK(t *testing.T, script string, o sendoncetest.Options) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(nodeSDKDir, "node_modules", "resend", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Resend Node SDK test cannot run: %v (.ci/run installs Node's packages: npm ci --prefix %s)", err, nodeSDKDir)
		}
		t.Skipf("needs node and `npm ci --prefix internal/httpapi/%s`: %v", nodeSDKDir, err)
	}
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		dns := dnstest.Start(t) // publishes nothing: verify fails, as the test expects
		o := o
		o.Backend, o.DNSResolver = b, dns.Addr()
		env := sendoncetest.Start(t, o)
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "mb-node",
			Body: map[string]any{"id": "node", "address": "hello@node.test"}}); r.Status != http.StatusCreated {
			t.Fatalf("mailbox: %d %s", r.Status, r.Body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "--test", script)
		cmd.Dir = nodeSDKDir
		cmd.Env = append(os.Environ(), "RESEND_BASE_URL="+env.URL, "RESEND_API_KEY="+env.AdminKey)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node --test: %v\n%s", err, out)
		}
		t.Logf("%s", out)
	})
}
