package delivery_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// outage outlasts the whole retry schedule of these tests (retryBase and
// maxAttempts below: a few tens of milliseconds).
const outage = 1500 * time.Millisecond

// A database that refuses every change of the sends for longer than the
// whole retry schedule strands nothing: no claim can be written meanwhile,
// and once the database answers again every send is delivered, each
// exactly once. (With a job queue beside the sends, the jobs could use up
// their attempts during the outage and leave their sends queued for ever.)
func TestDeliver_DatabaseOutageLongerThanTheRetryScheduleStrandsNothing(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, MaxAttempts: 3})
		restore := env.FailUpdates(t, "sends") // accepts insert; claims and outcomes update
		var ids []string
		for i := range 6 {
			ids = append(ids, send(t, env, sendoncetest.Mail(fmt.Sprintf("o%d@example.com", i), fmt.Sprintf("outage %d", i))))
		}
		time.Sleep(outage)
		for _, id := range ids {
			if st := str(getSend(t, env, id), "status"); st != string(core.StatusQueued) {
				t.Fatalf("%s is %s during the outage, want queued", id, st)
			}
		}
		if c := env.SMTP.Connections(); c != 0 {
			t.Fatalf("%d SMTP connections during the outage: an attempt ran unclaimed", c)
		}
		restore()
		requireEachSentOnce(t, env, ids)
	})
}

// An outcome that cannot be written while the database is away is written
// when it is back (within the lease), instead of leaving the send to the
// rescuer as unknown.
func TestDeliver_OutcomeWrittenAfterAShortOutage(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase})
		// The relay holds its answer to DATA until the outage is in place,
		// so the 250 always arrives while the database refuses the
		// outcome, however slow the machine.
		hold := make(chan struct{})
		env.SMTP.SetBehaviour(smtptest.Behaviour{HoldData: hold})
		var ids []string
		for i := range 3 {
			ids = append(ids, send(t, env, sendoncetest.Mail(fmt.Sprintf("w%d@example.com", i), fmt.Sprintf("outcome %d", i))))
		}
		for _, id := range ids {
			env.WaitStatus(t, id, waitLong, core.StatusSending)
		}
		restore := env.FailUpdates(t, "sends")
		close(hold)        // the relay answers 250 now, during the outage
		time.Sleep(outage) // the outcome writes fail meanwhile
		for _, id := range ids {
			if st := str(getSend(t, env, id), "status"); st != string(core.StatusSending) {
				t.Fatalf("%s is %s during the outage, want sending", id, st)
			}
		}
		restore()
		requireEachSentOnce(t, env, ids)
	})
}

func requireEachSentOnce(t *testing.T, env *sendoncetest.Env, ids []string) {
	t.Helper()
	for _, id := range ids {
		env.WaitStatus(t, id, waitLong, core.StatusSent)
	}
	time.Sleep(settle)
	counts := env.SMTP.MessageIDCounts()
	for _, id := range ids {
		if n := counts[bareID(str(getSend(t, env, id), "message_id"))]; n != 1 {
			t.Errorf("%s delivered %d times, want exactly once", id, n)
		}
	}
}
