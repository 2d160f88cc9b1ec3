package main_test

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The lines before a crash are the ones an operator needs: a warning is
// in the log of a process SIGKILLed right after it was logged (the log is
// buffered, but warnings and errors are written at once). The warning
// here is the SES intake refusing a message from a topic --ses-sns-topic
// does not name; the process is killed as soon as its 403 arrives.
func TestServe_WarningSurvivesSIGKILL(t *testing.T) {
	binaryTest(t)
	db := sqliteDB(t)
	p := startServe(t, "--db", db, "--ses-sns-topic", "arn:aws:sns:eu-west-1:123456789012:ses-events")
	body := `{"Type":"Notification","MessageId":"kill-test-1","TopicArn":"arn:aws:sns:eu-west-1:999999999999:elsewhere",` +
		`"Message":"{}","Timestamp":"` + time.Now().UTC().Format(time.RFC3339) + `","SignatureVersion":"2","Signature":"AA==",` +
		`"SigningCertURL":"https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-x.pem"}`
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Post(p.url+"/v1/providers/ses/events", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another topic's message: %d; want 403", resp.StatusCode)
	}
	_ = p.cmd.Wait()
	select {
	case <-p.done: // the whole log is read
	case <-time.After(10 * time.Second):
		t.Fatal("the killed process's log did not end")
	}
	if logs := p.logText(); !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "kill-test-1") {
		t.Errorf("the warning logged before SIGKILL is not in the log:\n%s", logs)
	}
}
