package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestResendNodeSDK_Suppressions runs suppressions.test.mjs (the official
// Resend Node SDK's suppressions.* with only RESEND_BASE_URL changed) on
// each backend, with one entry a bounce made beside the manual ones.
func TestResendNodeSDK_Suppressions(t *testing.T) {
	node := nodeBinary(t)
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		r := env.Send(t, "node-supp", sendoncetest.Mail("bounced@node.test", "x"))
		if r.Status != http.StatusOK {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		sendID := r.JSON(t)["id"].(string)
		// The entry a permanent bounce leaves (internal/mxserver's tests make
		// it from a real report).
		err := env.Server.Store.InTx(context.Background(), func(tx core.Tx) error {
			_, err := tx.AddSuppression(context.Background(), &core.Suppression{ID: "sup_0bounce", Tenant: "default",
				Address: "bounced@node.test", Reason: "bounce 5.1.1", Origin: core.SuppressionBounce, SendID: sendID, CreatedAt: time.Now()})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		runNodeTest(t, node, "suppressions.test.mjs", env, "SENDONCE_BOUNCED=bounced@node.test", "SENDONCE_SEND_ID="+sendID)
	})
}
