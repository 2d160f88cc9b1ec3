package delivery_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/delivery"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// Large messages are handed over at most DefaultLargeAttempts at a time
// in one process, so many big sends at once keep memory bounded; the
// others wait, untouched, and every one is delivered once in the end.
func TestDeliver_LargeMessagesAreBoundedInFlight(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, RetryBase: retryBase})
	hold := make(chan struct{})
	env.SMTP.SetBehaviour(smtptest.Behaviour{HoldData: hold})
	file := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 64<<10)))
	n := delivery.DefaultLargeAttempts + 2
	var ids []string
	for i := range n {
		m := sendoncetest.Mail(fmt.Sprintf("big%d@example.com", i), fmt.Sprintf("large %d", i))
		m["attachments"] = []map[string]any{{"filename": "a.bin", "content": file}}
		ids = append(ids, send(t, env, m))
	}
	small := send(t, env, sendoncetest.Mail("small@example.com", "small"))

	// The bound fills, and stays full rather than growing, while the relay
	// holds every message it has; the small send is not held back by it.
	deadline := time.Now().Add(waitLong)
	for env.SMTP.Holding() < delivery.DefaultLargeAttempts+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for range 20 { // a second, sampled
		if h := env.SMTP.Holding(); h > delivery.DefaultLargeAttempts+1 {
			t.Fatalf("%d messages in the relay's hands at once, want at most %d large + 1 small", h, delivery.DefaultLargeAttempts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h := env.SMTP.Holding(); h != delivery.DefaultLargeAttempts+1 {
		t.Fatalf("%d messages held, want the %d large ones the bound lets through and the small one", h, delivery.DefaultLargeAttempts)
	}
	close(hold)
	requireEachSentOnce(t, env, append(ids, small))
}
