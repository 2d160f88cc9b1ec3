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
	node := nodeBinary(t)
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		dns := dnstest.Start(t) // publishes nothing: verify fails, as the test expects
		o := o
		o.Backend, o.DNSResolver = b, dns.Addr()
		env := sendoncetest.Start(t, o)
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "mb-node",
			Body: map[string]any{"id": "node", "address": "hello@node.test"}}); r.Status != http.StatusCreated {
			t.Fatalf("mailbox: %d %s", r.Status, r.Body)
		}
		runNodeTest(t, node, script, env)
	})
}

// nodeBinary returns node's path once node and the installed SDK are
// there; without them it skips locally and fails in CI.
func nodeBinary(t *testing.T) string {
	t.Helper()
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
	return node
}

// runNodeTest runs `node --test script` against env with the admin key,
// and extra environment (NAME=value) for the script.
func runNodeTest(t *testing.T, node, script string, env *sendoncetest.Env, extra ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", script)
	cmd.Dir = nodeSDKDir
	cmd.Env = append(append(os.Environ(), "RESEND_BASE_URL="+env.URL, "RESEND_API_KEY="+env.AdminKey), extra...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test %s: %v\n%s", script, err, out)
	}
	t.Logf("%s", out)
}
