package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestCrash_MXKilledBetweenTwoDestinations: a send to two destinations
// under --transport mx; the first destination took the message, the second
// is inside DATA when the worker is SIGKILLed. After the restart the first
// destination's recipient is delivered (written before the second
// handoff), the send is unknown (the second handoff may have happened) and
// nothing is sent by itself; reconcile's resend goes to the second
// destination only. Nobody gets the message twice.
func TestCrash_MXKilledBetweenTwoDestinations(t *testing.T) {
	binaryTest(t)
	first := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.13:0"})
	second := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.14:" + first.Port})
	hold := make(chan struct{}) // never closed: the held DATA is never answered
	second.SetBehaviour(smtptest.Behaviour{HoldData: hold})
	dns := dnstest.Start(t, "one.test. MX 10 mx.one.test.", "mx.one.test. A 127.0.0.13",
		"two.test. MX 10 mx.two.test.", "mx.two.test. A 127.0.0.14")
	db := sqliteDB(t)
	secret := createKey(t, db, "mx", "send,read,admin")
	args := []string{"--db", db, "--transport", "mx", "--mx-port", first.Port, "--dns-resolver", dns.Addr(),
		"--outbound-allow", "127.0.0.0/8", "--retry-base", "50ms", "--attempt-lease", "2s", "--poll-interval", "20ms"}
	p := startServe(t, args...)
	do := func(method, path, idem, body string) map[string]any {
		t.Helper()
		status, b := apiCall(t, method, p.url+path, secret, idem, body)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil || status != http.StatusOK {
			t.Fatalf("%s %s: %d %v %s", method, path, status, err, b)
		}
		return v
	}
	recipients := func(v map[string]any) map[string]string {
		out := map[string]string{}
		rs, _ := v["recipients"].([]any)
		for _, r := range rs {
			m, _ := r.(map[string]any)
			out[fmt.Sprint(m["email"])] = fmt.Sprint(m["status"])
		}
		return out
	}
	id := do("POST", "/v1/send", "two-destinations", `{"to":["ann@one.test","bob@two.test"],"subject":"split","text":"x"}`)["id"].(string)

	waitFor(t, 20*time.Second, "the second destination inside DATA", func() bool { return second.Holding() == 1 })
	if n := len(first.Messages()); n != 1 {
		t.Fatalf("the first destination has %d messages, want 1", n)
	}
	p.sigkill(t)
	second.SetBehaviour(smtptest.Behaviour{})

	p = startServe(t, args...)
	var v map[string]any
	waitFor(t, 30*time.Second, "the send rescued to unknown", func() bool {
		v = do("GET", "/v1/sends/"+id, "", "")
		return v["status"] == "unknown"
	})
	if rs := recipients(v); rs["ann@one.test"] != "delivered" || rs["bob@two.test"] != "unknown" {
		t.Errorf("after the crash the recipients are %v, want ann@ delivered (written before the second handoff) and bob@ unknown", rs)
	}
	time.Sleep(time.Second) // nothing moves by itself
	if n, m := len(first.Messages()), len(second.Messages()); n != 1 || m != 0 {
		t.Fatalf("after the crash: %d and %d messages at the destinations, want 1 and 0", n, m)
	}

	do("POST", "/v1/sends/"+id+"/reconcile", "reconcile-1", `{"outcome":"resend"}`)
	waitFor(t, 30*time.Second, "the send delivered after reconcile", func() bool {
		v = do("GET", "/v1/sends/"+id, "", "")
		return v["status"] == "delivered"
	})
	time.Sleep(500 * time.Millisecond)
	if n, m := len(first.Messages()), len(second.Messages()); n != 1 || m != 1 {
		t.Errorf("after reconcile: %d and %d messages at the destinations, want 1 and 1 (ann@ never twice)", n, m)
	}
	if rs := recipients(v); rs["ann@one.test"] != "delivered" || rs["bob@two.test"] != "delivered" {
		t.Errorf("recipients %v, want both delivered", rs)
	}
}
