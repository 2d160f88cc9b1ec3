package httpapi_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestResendNodeSDK_Suppressions runs suppressions.test.mjs (the official
// Resend Node SDK's suppressions.* with only RESEND_BASE_URL changed) on
// each backend, with one entry a bounce made beside the manual ones.
func TestResendNodeSDK_Suppressions(t *testing.T) {
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
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b})
		r := env.Send(t, "node-supp", sendoncetest.Mail("bounced@node.test", "x"))
		if r.Status != http.StatusOK {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		sendID := r.JSON(t)["id"].(string)
		// The entry a permanent bounce leaves (internal/inbound's tests make
		// it from a real report).
		err := env.Server.Store.InTx(context.Background(), func(tx core.Tx) error {
			_, err := tx.AddSuppression(context.Background(), &core.Suppression{ID: "sup_0bounce", Tenant: "default",
				Address: "bounced@node.test", Reason: "bounce 5.1.1", Origin: core.SuppressionBounce, SendID: sendID, CreatedAt: time.Now()})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "--test", "suppressions.test.mjs")
		cmd.Dir = nodeSDKDir
		cmd.Env = append(os.Environ(), "RESEND_BASE_URL="+env.URL, "RESEND_API_KEY="+env.AdminKey,
			"SENDONCE_BOUNCED=bounced@node.test", "SENDONCE_SEND_ID="+sendID)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node --test: %v\n%s", err, out)
		}
		t.Logf("%s", out)
	})
}
