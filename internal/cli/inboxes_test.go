package cli_test

import (
	"net/smtp"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestInboxesCommand: `sendonce inboxes create` makes an address receive
// under the claim rule of POST /v1/inboxes (refused on a domain the
// tenant has not added), a server on the database stores mail for it,
// `inboxes list` shows it and `inboxes remove` stops it receiving.
func TestInboxesCommand(t *testing.T) {
	srv := sendoncetest.Start(t, sendoncetest.Options{Inbound: true, NoWorkers: true})
	env := map[string]string{"SENDONCE_DB": srv.DB, "SENDONCE_SECRET_KEY": cliSecret}

	if r := runCLI(t, env, "inboxes", "create", "help@unknown.test"); r.err == nil {
		t.Fatalf("an inbox on a domain nobody added was made: %s", r.stdout)
	}
	if r := runCLI(t, env, "domains", "add", "recv.test", "--receive", "--mx-host", "mx.recv.test"); r.err != nil {
		t.Fatalf("domains add: %v\n%s", r.err, r.stderr)
	}
	r := runCLI(t, env, "inboxes", "create", "help@recv.test", "--name", "Help desk")
	if r.err != nil {
		t.Fatalf("inboxes create: %v\n%s", r.err, r.stderr)
	}
	id, addr, _ := strings.Cut(strings.TrimSpace(r.stdout), "\t")
	if !strings.HasPrefix(id, "inb_") || addr != "help@recv.test" || !strings.Contains(r.stderr, "--inbound-addr") {
		t.Fatalf("inboxes create printed %q / %q", r.stdout, r.stderr)
	}
	if l := runCLI(t, env, "inboxes", "list"); l.err != nil || !strings.Contains(l.stdout, id) || !strings.Contains(l.stdout, "Help desk") {
		t.Fatalf("inboxes list: %v %q", l.err, l.stdout)
	}

	mail := []byte("From: a@sender.test\r\nTo: help@recv.test\r\nSubject: hi\r\nMessage-ID: <cli-1@sender.test>\r\n\r\nhello\r\n")
	if err := smtp.SendMail(srv.InboundAddr, nil, "a@sender.test", []string{"help@recv.test"}, mail); err != nil {
		t.Fatalf("mail for the inbox the CLI made: %v", err)
	}
	got := srv.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/received", Key: srv.AdminKey})
	if data, _ := got.JSON(t)["data"].([]any); len(data) != 1 {
		t.Fatalf("received: %s", got.Body)
	}

	if r := runCLI(t, env, "inboxes", "remove", "help@recv.test"); r.err != nil {
		t.Fatalf("inboxes remove: %v\n%s", r.err, r.stderr)
	}
	err := smtp.SendMail(srv.InboundAddr, nil, "a@sender.test", []string{"help@recv.test"}, mail)
	if err == nil || !strings.Contains(err.Error(), "550") {
		t.Fatalf("mail after inboxes remove: %v, want 550", err)
	}
}
