package main_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/seslocal"
)

// sesSendPath is SES v2 SendEmail's route, the one the proxy holds.
const sesSendPath = "/v2/email/outbound-emails"

// A process is SIGKILLed while SES (the npm emulator) holds its message
// and the answer is still on its way: the proxy forwarded the request and
// holds SES's answer. The restarted process finds the attempt's lease run
// out and makes the send unknown — SES has no idempotency key, so asking
// again could only make a second copy. The emulator's store holds exactly
// one, and SES saw exactly one request, on SQLite and on PostgreSQL.
func TestProvider_SESKilledDuringHandoffIsUnknownNotResent(t *testing.T) {
	binaryTest(t)
	emu := seslocal.Start(t)
	eachDB(t, func(t *testing.T, backend, db string) {
		sesKillDuringHandoff(t, emu, db, backend)
	})
}

func sesKillDuringHandoff(t *testing.T, emu *seslocal.Emulator, db, backend string) {
	px := faultproxy.Start(t, faultproxy.Options{Upstream: emu.URL, Delay: 30 * time.Second,
		Plan: faultproxy.Always("POST", sesSendPath, faultproxy.Delay)})
	secret := createKey(t, db, "ses-crash", "send,read,admin")
	args := []string{"--db", db, "--transport", "ses://AKID:secret@eu-west-1?endpoint=" + px.URL,
		"--retry-base", "50ms", "--attempt-lease", "2s", "--poll-interval", "20ms"}
	p := startServe(t, args...)
	a := api{t: t, url: p.url, secret: secret, hc: &http.Client{Timeout: 10 * time.Second}}
	subject := "Handoff ses-kill-" + backend
	v := a.send("ses-kill-" + backend)
	copies := func() int {
		n := 0
		for _, e := range emu.Emails(t) {
			if e.Subject == subject {
				n++
			}
		}
		return n
	}
	// The emulator took the message; its answer is held by the proxy.
	waitFor(t, 20*time.Second, "the emulator to hold the message", func() bool { return copies() == 1 })
	p.sigkill(t)

	// From now on SES answers at once: a resend would show.
	px.SetPlan(nil)
	p = startServe(t, args...)
	a.url = p.url
	final := a.waitDecided([]string{v.ID}, 60*time.Second)[v.ID]
	// A wrongly retried attempt would land within a few polls; give it time.
	time.Sleep(time.Second)
	if final.Status != "unknown" {
		t.Errorf("after the kill the send is %s; want unknown", final.Status)
	}
	if n, reqs := copies(), px.Count("POST", sesSendPath); n != 1 || reqs != 1 {
		t.Fatalf("SES got %d requests and holds %d copies; want 1 and 1\n%s", reqs, n, p.logText())
	}
	t.Logf("%s: SIGKILL while SES's answer was held: send %s, 1 request, 1 copy", backend, final.Status)
}
