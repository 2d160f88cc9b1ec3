package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// api is a tiny client of one running server for the tests below.
type api struct {
	t      *testing.T
	url    string
	secret string
	hc     *http.Client
}

func (a api) send(key string) sendView {
	a.t.Helper()
	body := fmt.Sprintf(`{"to":"%s@example.com","subject":"Handoff %s","text":"hello"}`, key, key)
	req, _ := http.NewRequest("POST", a.url+"/v1/send", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.secret)
	req.Header.Set("Idempotency-Key", key)
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatalf("POST /v1/send: %v", err)
	}
	defer resp.Body.Close()
	var v sendView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		a.t.Fatalf("POST /v1/send: %d %v", resp.StatusCode, err)
	}
	return v
}

func (a api) get(id string) sendView {
	a.t.Helper()
	req, _ := http.NewRequest("GET", a.url+"/v1/sends/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+a.secret)
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatalf("GET /v1/sends/%s: %v", id, err)
	}
	defer resp.Body.Close()
	var v sendView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		a.t.Fatalf("GET /v1/sends/%s: %v", id, err)
	}
	return v
}

// waitDecided polls until no send is queued or sending, bounded by wait.
func (a api) waitDecided(ids []string, wait time.Duration) map[string]sendView {
	a.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		out, pending := map[string]sendView{}, 0
		for _, id := range ids {
			v := a.get(id)
			out[id] = v
			if v.Status == "queued" || v.Status == "sending" {
				pending++
			}
		}
		if pending == 0 {
			return out
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%d sends still queued or sending after %s", pending, wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor polls cond every 10ms, bounded by wait.
func waitFor(t *testing.T, wait time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(wait); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", wait, what)
		}
	}
}

// A send whose attempt never reached the relay — it was waiting for one of
// the relay's pooled sessions when the process was SIGKILLed — is retried,
// not declared unknown: unknown means the handoff may have happened.
// Twelve sends, two sessions, each message held 2s at the relay's end of
// DATA: at the kill, two messages are inside DATA and ten never left.
func TestCrash_SendsThatNeverReachedTheRelayAreRetriedNotUnknown(t *testing.T) {
	binaryTest(t)
	smtpd := smtptest.Start(t, smtptest.Options{})
	smtpd.SetBehaviour(smtptest.Behaviour{DelayData: 2 * time.Second})
	db := sqliteDB(t)
	secret := createKey(t, db, "handoff", "send,read,admin")
	args := []string{"--db", db, "--transport", "smtp://" + smtpd.Addr + "?tls=none&max_sessions=2",
		"--retry-base", "50ms", "--attempt-lease", "3s", "--poll-interval", "20ms", "--workers", "20"}
	p := startServe(t, args...)
	a := api{t: t, url: p.url, secret: secret, hc: &http.Client{Timeout: 10 * time.Second}}
	var ids []string
	for i := range 12 {
		ids = append(ids, a.send(fmt.Sprintf("handoff-%02d", i)).ID)
	}
	waitFor(t, 10*time.Second, "two sessions open at the relay", func() bool { return smtpd.Connections() >= 2 })
	time.Sleep(500 * time.Millisecond) // both messages are inside DATA now
	p.sigkill(t)
	smtpd.SetBehaviour(smtptest.Behaviour{})

	p = startServe(t, args...)
	a.url = p.url
	final := a.waitDecided(ids, 60*time.Second)
	time.Sleep(2 * time.Second) // the two held messages are recorded when their delay ends
	atRelay := smtpd.MessageIDCounts()
	unknown, neverLeft := 0, 0
	for id, v := range final {
		n := atRelay[strings.Trim(v.MessageID, "<>")]
		switch {
		case n > 1:
			t.Errorf("send %s (%s): delivered %d times", id, v.Status, n)
		case v.Status == "unknown":
			unknown++
			if n == 0 {
				neverLeft++
			}
		case v.Status != "sent":
			t.Errorf("send %s is %s, want sent or unknown", id, v.Status)
		case n == 0:
			t.Errorf("send %s is sent but not at the relay", id)
		}
	}
	if neverLeft > 0 || unknown > 2 {
		t.Fatalf("%d sends unknown, %d of them never reached the relay; want at most the 2 inside DATA at the kill, all at the relay",
			unknown, neverLeft)
	}
	t.Logf("12 sends, 2 sessions, SIGKILL with 2 inside DATA: %d unknown (at the relay), %d sent", unknown, len(final)-unknown)
}

// SIGTERM lets an attempt already inside DATA finish, and the process
// exits once its outcome is recorded: the send is sent, not unknown. The
// relay holds the end of DATA until the test lets it go, after SIGTERM.
func TestServe_GracefulShutdownLetsAttemptsInFlightFinish(t *testing.T) {
	binaryTest(t)
	smtpd := smtptest.Start(t, smtptest.Options{})
	hold := make(chan struct{})
	held := true
	letGo := func() {
		if held {
			held = false
			close(hold)
		}
	}
	defer letGo() // also when the test fails first
	smtpd.SetBehaviour(smtptest.Behaviour{HoldData: hold})
	db := sqliteDB(t)
	secret := createKey(t, db, "graceful", "send,read,admin")
	p := startServe(t, "--db", db, "--transport", "smtp://"+smtpd.Addr+"?tls=none&max_sessions=1",
		"--retry-base", "50ms", "--poll-interval", "20ms")
	a := api{t: t, url: p.url, secret: secret, hc: &http.Client{Timeout: 10 * time.Second}}
	var ids []string
	for i := range 3 {
		ids = append(ids, a.send(fmt.Sprintf("graceful-%d", i)).ID)
	}
	waitFor(t, 10*time.Second, "a message inside DATA at the relay", func() bool { return smtpd.Holding() == 1 })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	// It took the signal, and must not exit while the relay holds the
	// attempt. A second is how long a broken build has to show it exits
	// anyway; a good one never does, however slow the machine.
	waitFor(t, 10*time.Second, "the shutdown to begin", func() bool { return strings.Contains(p.logText(), "shutting down") })
	select {
	case err := <-exited:
		t.Fatalf("exited (%v) while an attempt was inside DATA\n%s", err, p.logText())
	case <-time.After(time.Second):
	}
	letGo()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logText())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("no exit within 40s of SIGTERM\n%s", p.logText())
	}
	// Read the outcomes without delivering anything more.
	p = startServe(t, "--db", db, "--role", "api")
	a.url = p.url
	atRelay := smtpd.MessageIDCounts()
	sent := 0
	for _, id := range ids {
		v := a.get(id)
		n := atRelay[strings.Trim(v.MessageID, "<>")]
		switch v.Status {
		case "sent":
			sent++
			if n != 1 {
				t.Errorf("send %s is sent, %d times at the relay", id, n)
			}
		case "queued":
			if n != 0 {
				t.Errorf("send %s is queued, %d times at the relay", id, n)
			}
		default:
			t.Errorf("send %s is %s after a graceful stop (relay: %d); want sent, or queued if it never started", id, v.Status, n)
		}
	}
	if sent == 0 {
		t.Errorf("no send finished: the attempt inside DATA at SIGTERM should have")
	}
}
