package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/internal/cli"
	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

type result struct {
	stdout, stderr string
	err            error
}

func runCLI(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err := cli.Run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	return result{out.String(), errOut.String(), err}
}

// sqliteDSN is the --db of a fresh SQLite database in the test's own
// temporary folder.
func sqliteDSN(t *testing.T) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "s.db")
}

// openDB opens the database the commands wrote, to read what they
// stored; it is closed when the test ends.
func openDB(t *testing.T, dsn string) *sqlstore.Store {
	t.Helper()
	store, err := server.OpenStore(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)

func TestSendStatusSends(t *testing.T) {
	srv := sendoncetest.Start(t, sendoncetest.Options{})
	env := map[string]string{"SENDONCE_API_URL": srv.URL, "SENDONCE_API_KEY": srv.AdminKey}
	mail := []string{"send", "--to", "Ada <ada@example.com>", "--subject", "Welcome", "--text", "Hello Ada!"}

	// Without a key: one is made, printed before the call, with how to retry.
	r := runCLI(t, env, mail...)
	if r.err != nil {
		t.Fatalf("send: %v\n%s", r.err, r.stderr)
	}
	key := uuidRE.FindString(r.stderr)
	if key == "" || !strings.Contains(r.stderr, "--idempotency-key "+key) || !strings.Contains(r.stderr, "second email") {
		t.Fatalf("send without a key: stderr does not show the new key and how to retry:\n%s", r.stderr)
	}
	id := regexp.MustCompile(`snd_\S+`).FindString(r.stdout)
	if id == "" || !strings.Contains(r.stdout, "queued") || !strings.Contains(r.stdout, key) {
		t.Fatalf("send summary:\n%s", r.stdout)
	}

	// The retry with the printed key is a replay, not a second email.
	r = runCLI(t, env, append(mail, "--idempotency-key", key, "--json")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || obj["id"] != id || obj["idempotency_key"] != key {
		t.Fatalf("send --json with the key: %v\n%s", err, r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("send with a key printed to stderr: %s", r.stderr)
	}
	r = runCLI(t, env, append(mail, "--idempotency-key", key)...)
	if r.err != nil || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "nothing was sent again") {
		t.Fatalf("retry summary: %v\n%s", r.err, r.stdout)
	}

	// Same key, other content: refused, explained.
	r = runCLI(t, env, "send", "--to", "ada@example.com", "--subject", "Other", "--text", "x", "--idempotency-key", key)
	if client.ErrorCode(r.err) != client.CodeKeyReused || !strings.Contains(r.err.Error(), "different content") {
		t.Fatalf("same key, other content: %v", r.err)
	}

	// status, with flags after the id.
	r = runCLI(t, env, "status", id)
	if r.err != nil || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "key:") || !strings.Contains(r.stdout, "events:") {
		t.Fatalf("status: %v\n%s", r.err, r.stdout)
	}
	r = runCLI(t, env, "status", id, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || obj["events"] == nil {
		t.Fatalf("status --json: %v %v\n%s", r.err, err, r.stdout)
	}

	// sends by key: one; by an unused key: none, and it says it is safe.
	r = runCLI(t, env, "sends", "--idempotency-key", key)
	if r.err != nil || strings.Count(r.stdout, "snd_") != 1 || !strings.Contains(r.stdout, id) {
		t.Fatalf("sends --idempotency-key: %v\n%s", r.err, r.stdout)
	}
	r = runCLI(t, env, "sends", "--recipient", "Ada@Example.com")
	if r.err != nil || strings.Count(r.stdout, "snd_") != 1 || !strings.Contains(r.stdout, id) {
		t.Fatalf("sends --recipient: %v\n%s", r.err, r.stdout)
	}
	r = runCLI(t, env, "sends", "--recipient", "bob@example.com")
	if r.err != nil || !strings.Contains(r.stdout, "No sends.") {
		t.Fatalf("sends --recipient for another address: %v\n%s", r.err, r.stdout)
	}
	r = runCLI(t, env, "sends", "--idempotency-key", "never-used", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || len(obj["data"].([]any)) != 0 {
		t.Fatalf("sends --json for an unused key: %v\n%s", err, r.stdout)
	}
	r = runCLI(t, env, "sends", "--idempotency-key", "never-used")
	if r.err != nil || !strings.Contains(r.stdout, "No send has the key never-used") {
		t.Fatalf("sends for an unused key: %v\n%s", r.err, r.stdout)
	}

	// A template with variables, and an HTML body from a file.
	c, _ := client.New(client.Config{BaseURL: srv.URL, APIKey: srv.AdminKey})
	if _, err := c.PutTemplate(context.Background(), "welcome", &client.TemplateParams{Subject: "Hi {{.name}}", Text: "Hello {{.name}}"}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, env, "send", "--to", "bob@example.com", "--template", "welcome", "--var", "name=Bob", "--idempotency-key", "tpl-1")
	if r.err != nil || !strings.Contains(r.stdout, "Hi Bob") {
		t.Fatalf("templated send: %v\n%s", r.err, r.stdout)
	}
	page := filepath.Join(t.TempDir(), "mail.html")
	if err := os.WriteFile(page, []byte("<p>Hello</p>"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, env, "send", "--to", "bob@example.com", "--subject", "Page", "--html-file", page, "--idempotency-key", "html-1")
	if r.err != nil {
		t.Fatalf("--html-file: %v", r.err)
	}
}

func TestSend_UnknownOutcomeSaysHowToRecover(t *testing.T) {
	srv := sendoncetest.Start(t, sendoncetest.Options{})
	px := faultproxy.Start(t, faultproxy.Options{Upstream: srv.URL, Plan: faultproxy.Always("POST", "/v1/send", faultproxy.ResetAfter)})
	env := map[string]string{"SENDONCE_API_URL": px.URL, "SENDONCE_API_KEY": srv.AdminKey}
	r := runCLI(t, env, "send", "--to", "ada@example.com", "--subject", "x", "--text", "y", "--idempotency-key", "lost-1")
	if r.err == nil || !client.IsOutcomeUnknown(r.err) {
		t.Fatalf("send through a resetting proxy: %v; want an unknown outcome", r.err)
	}
	for _, want := range []string{"outcome is unknown", "sendonce sends --idempotency-key lost-1", "--idempotency-key lost-1"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, r.err)
		}
	}
	// Every attempt carried the same key, and the server made one send.
	if n := px.Count("POST", "/v1/send"); n < 2 {
		t.Errorf("%d POSTs; the client should have retried", n)
	}
	direct := map[string]string{"SENDONCE_API_URL": srv.URL, "SENDONCE_API_KEY": srv.AdminKey}
	r = runCLI(t, direct, "sends", "--idempotency-key", "lost-1")
	if r.err != nil || strings.Count(r.stdout, "snd_") != 1 {
		t.Fatalf("after the lost answers the key has not exactly one send:\n%s", r.stdout)
	}
}

func TestClientCommands_UsageErrors(t *testing.T) {
	env := map[string]string{"SENDONCE_API_KEY": "so_x"}
	for _, args := range [][]string{
		{"send", "--subject", "x", "--text", "y"},           // no --to
		{"send", "--to", "a@example.com", "--text", "y"},    // no subject
		{"send", "--to", "a@example.com", "--subject", "x"}, // no body
		{"send", "--to", "a@example.com", "--var", "a=b", "--subject", "x", "--text", "y"},
		{"send", "--to", "a@example.com", "--subject", "x", "--text", "y", "--idempotency-key", "has space"},
		{"send", "--to", "a@example.com", "--subject", "x", "--text", "y", "stray"},
		{"status"},
		{"status", "a", "b"},
		{"sends", "stray"},
	} {
		if r := runCLI(t, env, args...); !errors.Is(r.err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, r.err)
		}
	}
	if r := runCLI(t, map[string]string{}, "status", "snd_1"); !errors.Is(r.err, cli.ErrUsage) || !strings.Contains(r.err.Error(), "SENDONCE_API_KEY") {
		t.Errorf("no API key: %v", r.err)
	}
	if r := runCLI(t, nil, "help"); !strings.Contains(r.stdout, "sendonce send") || !strings.Contains(r.stdout, "SENDONCE_API_URL") {
		t.Errorf("help does not list the client commands:\n%s", r.stdout)
	}
}

// TestSend_AttachAtAndCancel: send --attach stores the file's bytes under
// its base name, --at schedules the send, and cancel cancels it (a second
// cancel is the same answer, replayed).
func TestSend_AttachAtAndCancel(t *testing.T) {
	srv := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	env := map[string]string{"SENDONCE_API_URL": srv.URL, "SENDONCE_API_KEY": srv.AdminKey}
	file := filepath.Join(t.TempDir(), "report.pdf")
	data := []byte("%PDF-1.4 \x00\x01\x02 binary")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	r := runCLI(t, env, "send", "--to", "ada@example.com", "--subject", "Report", "--text", "attached",
		"--attach", file, "--at", at.Format(time.RFC3339), "--stream", "bulk", "--idempotency-key", "cli-attach", "--json")
	if r.err != nil {
		t.Fatalf("send --attach --at: %v\n%s", r.err, r.stderr)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || obj["status"] != "scheduled" || obj["attachments"] != float64(1) || obj["stream"] != "bulk" {
		t.Fatalf("send --json: %v\n%s", err, r.stdout)
	}
	if got, _ := time.Parse(time.RFC3339, obj["scheduled_at"].(string)); !got.Equal(at) {
		t.Fatalf("scheduled_at %v, want %v", obj["scheduled_at"], at)
	}
	id := obj["id"].(string)
	atts, err := srv.Server.Store.SendAttachments(context.Background(), id)
	if err != nil || len(atts) != 1 || atts[0].Filename != "report.pdf" || !bytes.Equal(atts[0].Data, data) || atts[0].ContentType != "application/pdf" {
		t.Fatalf("stored attachments %+v, %v", atts, err)
	}
	if r := runCLI(t, env, "send", "--to", "ada@example.com", "--subject", "x", "--text", "x", "--at", "tomorrow"); !errors.Is(r.err, cli.ErrUsage) {
		t.Fatalf("--at tomorrow: %v, want a usage error", r.err)
	}
	r = runCLI(t, env, "cancel", id)
	if r.err != nil || !strings.Contains(r.stdout, id+" canceled") {
		t.Fatalf("cancel: %v\n%s", r.err, r.stdout)
	}
	if r := runCLI(t, env, "cancel", id); r.err != nil || !strings.Contains(r.stdout, "canceled") {
		t.Fatalf("cancel again: %v\n%s", r.err, r.stdout)
	}
}
