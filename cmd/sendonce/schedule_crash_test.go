package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestCrash_ScheduledSendSurvivesSIGKILL: a send scheduled a few seconds
// ahead, its server killed with SIGKILL before its time and started again
// on the same database, reaches the relay once, not before its time.
func TestCrash_ScheduledSendSurvivesSIGKILL(t *testing.T) {
	binaryTest(t)
	smtpd := smtptest.Start(t, smtptest.Options{})
	db := sqliteDB(t)
	secret := createKey(t, db, "sched", "send,read")
	args := []string{"--db", db, "--transport", "smtp://" + smtpd.Addr + "?tls=none", "--poll-interval", "50ms"}
	p := startServe(t, args...)

	// Whole milliseconds: the store keeps microseconds, so the due time it
	// compares is exactly at.
	at := time.Now().Add(3 * time.Second).UTC().Truncate(time.Millisecond)
	body := fmt.Sprintf(`{"to":"ann@example.com","subject":"later","text":"x","scheduled_at":%q}`, at.Format(time.RFC3339Nano))
	status, b := apiCall(t, "POST", p.url+"/v1/send", secret, "sched-crash", body)
	var sv sendView
	if err := json.Unmarshal(b, &sv); status != http.StatusOK || err != nil || sv.Status != "scheduled" {
		t.Fatalf("scheduled send: %d %s", status, b)
	}
	p.sigkill(t)
	if time.Now().After(at) {
		t.Fatalf("the kill came after the send's time; the machine is too slow for this test")
	}
	p = startServe(t, args...)

	deadline := at.Add(15 * time.Second)
	for time.Now().Before(deadline) && len(smtpd.Messages()) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	arrived := time.Now()
	time.Sleep(500 * time.Millisecond) // a second delivery would land here
	msgs := smtpd.Messages()
	if len(msgs) != 1 {
		t.Fatalf("relay got %d messages, want 1", len(msgs))
	}
	if "<"+msgs[0].MessageID+">" != sv.MessageID {
		t.Fatalf("relay got %s, want %s", msgs[0].MessageID, sv.MessageID)
	}
	// arrived is when the poll saw the message, not when it came: the
	// attempt's start, on the server's clock, is what must not be early.
	if started := attemptStarted(t, p.url, secret, sv.ID); started.Before(at) {
		t.Fatalf("attempt started at %v, %v before its time %v", started, at.Sub(started), at)
	}
	t.Logf("delivered %v after its time, across a SIGKILL and a restart", arrived.Sub(at))
}

// attemptStarted returns the time of the send's one attempt_started event.
func attemptStarted(t *testing.T, url, secret, id string) time.Time {
	t.Helper()
	status, b := apiCall(t, "GET", url+"/v1/sends/"+id, secret, "", "")
	var v struct {
		Events []struct {
			Type string    `json:"type"`
			At   time.Time `json:"at"`
		} `json:"events"`
	}
	if err := json.Unmarshal(b, &v); err != nil || status != http.StatusOK {
		t.Fatalf("GET the send: %d, %v", status, err)
	}
	var starts []time.Time
	for _, e := range v.Events {
		if e.Type == "attempt_started" {
			starts = append(starts, e.At)
		}
	}
	if len(starts) != 1 {
		t.Fatalf("%d attempt_started events in %+v, want 1", len(starts), v.Events)
	}
	return starts[0]
}
