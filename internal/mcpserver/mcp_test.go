package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/cli"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/mcpserver"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// cliEnv makes the test binary run the sendonce command line instead of
// the tests: the stdio test starts it as "sendonce mcp", the code path
// cmd/sendonce's main runs.
const cliEnv = "SENDONCE_MCPSERVER_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := cli.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "sendonce:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// connect runs the MCP server in process and connects a client of the same
// SDK to it through the in-memory transport.
func connect(t *testing.T, env *sendoncetest.Env, secret string, copts *mcp.ClientOptions, cfg mcpserver.Config) *mcp.ClientSession {
	t.Helper()
	cfg.BaseURL, cfg.APIKey = env.URL, secret
	srv, err := mcpserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

// connectStdio starts "sendonce mcp" as a subprocess and connects to it
// over stdio.
func connectStdio(t *testing.T, env *sendoncetest.Env, secret string) *mcp.ClientSession {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "mcp", "--api-url", env.URL)
	cmd.Env = append(os.Environ(), cliEnv+"=1", "SENDONCE_API_KEY="+secret)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		t.Fatalf("start sendonce mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		_ = cs.Close()
		if t.Failed() {
			t.Logf("sendonce mcp stderr:\n%s", stderr.String())
		}
	})
	return cs
}

type result struct {
	mcpserver.SendOutput
	isError bool
	text    string
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) result {
	t.Helper()
	r, err := tryCall(cs, tool, args)
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return r
}

func tryCall(cs *mcp.ClientSession, tool string, args map[string]any) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return result{}, err
	}
	out := result{isError: res.IsError}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.text += tc.Text
		}
	}
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out.SendOutput); err != nil {
			return result{}, fmt.Errorf("structured content: %v: %s", err, b)
		}
	}
	return out, nil
}

func email(to, kind, ref, period string) map[string]any {
	return map[string]any{
		"intent":  map[string]any{"kind": kind, "reference": ref, "period": period},
		"to":      []string{to},
		"subject": "Reminder " + ref,
		"text":    "Please pay " + ref + ".",
	}
}

func agentKey(t *testing.T, env *sendoncetest.Env, p app.NewKeyParams) (*core.APIKey, string) {
	t.Helper()
	p.Agent = true
	if p.Name == "" {
		p.Name = "agent"
	}
	p.Scopes = []core.Scope{core.ScopeSend, core.ScopeRead}
	p.Mailboxes = []string{core.DefaultMailboxID}
	return env.NewKey(t, p)
}

// delivered counts the messages the relay accepted for rcpt.
func delivered(env *sendoncetest.Env, rcpt string) int {
	n := 0
	for _, m := range env.SMTP.Messages() {
		for _, to := range m.To {
			if strings.EqualFold(to, rcpt) {
				n++
			}
		}
	}
	return n
}

func sendsOfKey(t *testing.T, env *sendoncetest.Env, keyID string) int {
	t.Helper()
	return env.QueryInt(t, `SELECT count(*) FROM sends WHERE api_key_id = ?`, keyID)
}

// checkOneSend calls send_email n times (at once when parallel) with the
// same input and checks: exactly one call created the send, every call
// names the same send, and the relay got exactly one message.
func checkOneSend(t *testing.T, env *sendoncetest.Env, cs *mcp.ClientSession, args map[string]any, rcpt string, n int, parallel bool) string {
	t.Helper()
	results := make([]result, n)
	errs := make([]error, n)
	if parallel {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { results[i], errs[i] = tryCall(cs, "send_email", args) })
		}
		wg.Wait()
	} else {
		for i := range n {
			results[i], errs[i] = tryCall(cs, "send_email", args)
		}
	}
	created, id := 0, ""
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if r.isError || r.Send == nil {
			t.Fatalf("call %d: error result: %s", i, r.text)
		}
		if r.Created {
			created++
			if r.Outcome != "created" {
				t.Errorf("call %d: created with outcome %q", i, r.Outcome)
			}
		} else if r.Outcome != "found" {
			t.Errorf("call %d: outcome %q, want found", i, r.Outcome)
		}
		if id == "" {
			id = r.Send.ID
		}
		if r.Send.ID != id {
			t.Errorf("call %d: send %s, want %s", i, r.Send.ID, id)
		}
		if !strings.HasPrefix(r.IdempotencyKey, "mcp-v1:") {
			t.Errorf("call %d: idempotency key %q", i, r.IdempotencyKey)
		}
	}
	if created != 1 {
		t.Errorf("%d of %d calls created the send, want 1", created, n)
	}
	env.WaitStatus(t, id, 10*time.Second, core.StatusSent)
	if got := delivered(env, rcpt); got != 1 {
		t.Errorf("relay got %d messages for %s, want 1", got, rcpt)
	}
	return id
}

func TestMCP_SameIntentSendsOnce(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		key, secret := agentKey(t, env, app.NewKeyParams{})
		cs := connect(t, env, secret, nil, mcpserver.Config{})

		first := checkOneSend(t, env, cs, email("ada@example.com", "invoice_reminder", "INV-1", "2026-11"), "ada@example.com", 5, false)
		checkOneSend(t, env, cs, email("bob@example.com", "invoice_reminder", "INV-2", "2026-11"), "bob@example.com", 5, true)

		// The same intent reworded is still the same email.
		again := email("Ada <ADA@example.com>", "Invoice_Reminder", " INV-1 ", "2026-11")
		again["subject"] = "Friendly reminder"
		r := call(t, cs, "send_email", again)
		if r.isError || r.Created || r.Send == nil || r.Send.ID != first {
			t.Fatalf("reworded call: %+v %s", r.SendOutput, r.text)
		}

		// Every call after the first found the send: the server counts the
		// MCP server's finds as duplicates prevented.
		if got := metricValue(t, env, `sendonce_duplicates_prevented_total{via="mcp"}`); got < 1 {
			t.Errorf(`duplicates prevented via mcp = %v, want at least one found`, got)
		}

		// Another period is another email.
		r = call(t, cs, "send_email", email("ada@example.com", "invoice_reminder", "INV-1", "2026-12"))
		if r.isError || !r.Created || r.Send.ID == first {
			t.Fatalf("next period: %+v %s", r.SendOutput, r.text)
		}
		env.WaitStatus(t, r.Send.ID, 10*time.Second, core.StatusSent)
		if got := delivered(env, "ada@example.com"); got != 2 {
			t.Errorf("ada got %d messages, want 2 (one per period)", got)
		}
		if got := sendsOfKey(t, env, key.ID); got != 3 {
			t.Errorf("%d sends of the agent key, want 3", got)
		}

		// get_send_status and list_recent_sends see the agent's sends.
		st := call(t, cs, "get_send_status", map[string]any{"send_id": first})
		if st.isError {
			t.Fatalf("get_send_status: %s", st.text)
		}
		lr, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_recent_sends", Arguments: map[string]any{}})
		if err != nil || lr.IsError {
			t.Fatalf("list_recent_sends: %v %+v", err, lr)
		}
		var recent mcpserver.RecentOutput
		b2, _ := json.Marshal(lr.StructuredContent)
		_ = json.Unmarshal(b2, &recent)
		if len(recent.Sends) != 3 {
			t.Errorf("list_recent_sends: %d sends, want 3", len(recent.Sends))
		}
	})
}

func TestMCP_ApprovalKeyDeliversOnlyAfterApprove(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		_, secret := agentKey(t, env, app.NewKeyParams{RequiresApproval: true})
		cs := connect(t, env, secret, nil, mcpserver.Config{})
		args := email("carol@example.com", "welcome", "user-7", "2026-11")

		var id string
		for i := range 5 {
			r := call(t, cs, "send_email", args)
			if r.isError || !r.AwaitingApproval || r.Send.Status != "pending_approval" {
				t.Fatalf("call %d: %+v %s", i, r.SendOutput, r.text)
			}
			if i == 0 {
				id = r.Send.ID
			} else if r.Created || r.Send.ID != id {
				t.Fatalf("call %d: created again: %+v", i, r.SendOutput)
			}
		}
		time.Sleep(300 * time.Millisecond) // 15 worker polls
		if got := delivered(env, "carol@example.com"); got != 0 {
			t.Fatalf("%d messages delivered before approval", got)
		}

		// A person approves on the command line.
		var out, errb bytes.Buffer
		getenv := func(k string) string {
			return map[string]string{"SENDONCE_API_URL": env.URL, "SENDONCE_API_KEY": env.AdminKey}[k]
		}
		if err := cli.Run(context.Background(), []string{"approvals", "list"}, getenv, &out, &errb); err != nil || !strings.Contains(out.String(), id) {
			t.Fatalf("approvals list: %v %s %s", err, out.String(), errb.String())
		}
		for range 2 { // a repeated approval is a replay
			out.Reset()
			if err := cli.Run(context.Background(), []string{"approvals", "approve", id}, getenv, &out, &errb); err != nil {
				t.Fatalf("approvals approve: %v %s", err, errb.String())
			}
		}
		env.WaitStatus(t, id, 10*time.Second, core.StatusSent)
		if got := delivered(env, "carol@example.com"); got != 1 {
			t.Fatalf("%d messages after approval, want 1", got)
		}
		r := call(t, cs, "send_email", args)
		if r.Created || r.Send.Status != "sent" || r.AwaitingApproval {
			t.Fatalf("after approval: %+v", r.SendOutput)
		}
		if got := delivered(env, "carol@example.com"); got != 1 {
			t.Fatalf("%d messages, want 1", got)
		}
	})
}

type auditEntry struct {
	APIKeyID       string          `json:"api_key_id"`
	Intent         json.RawMessage `json:"intent"`
	IdempotencyKey *string         `json:"idempotency_key"`
	Status         int             `json:"status"`
	Outcome        string          `json:"outcome"`
	Code           *string         `json:"code"`
	SendID         *string         `json:"send_id"`
}

func TestMCP_GuardrailsRefuseAndAudit(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		key, secret := agentKey(t, env, app.NewKeyParams{AllowRecipients: []string{"example.com", "boss@partner.test"}, MaxPerHour: 2})
		cs := connect(t, env, secret, nil, mcpserver.Config{})

		outside := email("eve@evil.test", "report", "R-1", "2026-11")
		bcc := email("dan@example.com", "report", "R-2", "2026-11")
		bcc["bcc"] = []string{"spy@example.com"}
		from := email("dan@example.com", "report", "R-3", "2026-11")
		from["from"] = "ceo@example.com"
		cases := []struct {
			name  string
			args  map[string]any
			code  string
			param string
		}{
			{"recipient outside the allowlist", outside, "forbidden", "to"},
			{"bcc", bcc, "forbidden", "bcc"},
			{"from override", from, "forbidden", "from"},
		}
		for _, c := range cases {
			r := call(t, cs, "send_email", c.args)
			if !r.isError || r.Outcome != "refused" || r.Error == nil || r.Error.Code != c.code || r.Error.Param != c.param {
				t.Errorf("%s: got %+v %+v, want refused %s (%s)", c.name, r.SendOutput, r.Error, c.code, c.param)
			}
		}
		// Two sends fit the cap of 2 per hour; the third is refused.
		var ids []string
		for i, to := range []string{"dan@example.com", "boss@partner.test"} {
			r := call(t, cs, "send_email", email(to, "report", fmt.Sprintf("R-ok-%d", i), "2026-11"))
			if r.isError || !r.Created {
				t.Fatalf("send %d under the cap: %+v %s", i, r.SendOutput, r.text)
			}
			ids = append(ids, r.Send.ID)
		}
		r := call(t, cs, "send_email", email("dan@example.com", "report", "R-over", "2026-11"))
		if !r.isError || r.Error == nil || r.Error.Code != "rate_limited" || r.Error.HTTPStatus != 429 {
			t.Fatalf("send past the cap: %+v %+v", r.SendOutput, r.Error)
		}
		// The 429 carries Retry-After.
		resp := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: secret, IdemKey: "cap-check", Body: sendoncetest.Mail("dan@example.com", "x")})
		if resp.Status != 429 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("direct send past the cap: %d Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
		}

		for _, id := range ids {
			env.WaitStatus(t, id, 10*time.Second, core.StatusSent)
		}
		if n := len(env.SMTP.Messages()); n != 2 {
			t.Errorf("relay got %d messages, want the 2 allowed ones", n)
		}
		for _, rcpt := range []string{"eve@evil.test", "spy@example.com"} {
			if got := delivered(env, rcpt); got != 0 {
				t.Errorf("%s got %d messages", rcpt, got)
			}
		}
		if got := sendsOfKey(t, env, key.ID); got != 2 {
			t.Errorf("%d sends stored, want 2", got)
		}

		// Every attempt is in the audit log, refusals included.
		a := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/audit?limit=100", Key: env.AdminKey})
		if a.Status != 200 {
			t.Fatalf("GET /v1/audit: %d %s", a.Status, a.Body)
		}
		var list struct{ Data []auditEntry }
		if err := json.Unmarshal(a.Body, &list); err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for _, e := range list.Data {
			if e.APIKeyID != key.ID {
				t.Errorf("audit entry of key %s", e.APIKeyID)
			}
			code := ""
			if e.Code != nil {
				code = *e.Code
			}
			count[e.Outcome+"/"+code]++
			if e.IdempotencyKey == nil || *e.IdempotencyKey == "cap-check" {
				continue
			}
			if !strings.HasPrefix(*e.IdempotencyKey, "mcp-v1:") || string(e.Intent) == "null" || !bytes.Contains(e.Intent, []byte(`"kind":"report"`)) {
				t.Errorf("audit entry without intent or derived key: %+v %s", e, e.Intent)
			}
		}
		want := map[string]int{"refused/forbidden": 3, "created/": 2, "refused/rate_limited": 2}
		for k, n := range want {
			if count[k] != n {
				t.Errorf("audit: %d entries %s, want %d (all: %v)", count[k], k, n, count)
			}
		}
		// A non-agent key may not read the audit log.
		if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/audit", Key: secret}); r.Status != 403 {
			t.Errorf("agent key reading the audit log: %d", r.Status)
		}
	})
}

func TestMCP_ToolSchemas(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	_, secret := agentKey(t, env, app.NewKeyParams{})
	cs := connect(t, env, secret, nil, mcpserver.Config{})

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*mcp.Tool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = tl
	}
	for _, n := range []string{"send_email", "preview_email", "get_send_status", "list_templates", "list_recent_sends",
		"list_messages", "read_message", "reply_to_message", "forward_message"} {
		if names[n] == nil || names[n].Description == "" || names[n].InputSchema == nil {
			t.Errorf("tool %s missing, undescribed or without a schema", n)
		}
	}
	for _, n := range []string{"send_email", "reply_to_message", "forward_message"} {
		if schema, _ := json.Marshal(names[n].InputSchema); bytes.Contains(schema, []byte("idempotency")) {
			t.Errorf("%s takes an idempotency key argument: %s", n, schema)
		}
	}

	noIntent := email("ada@example.com", "x", "y", "z")
	delete(noIntent, "intent")
	r := call(t, cs, "send_email", noIntent)
	if !r.isError || !strings.Contains(r.text, "intent") {
		t.Errorf("send_email without intent: error %v, %q", r.isError, r.text)
	}
	noPeriod := email("ada@example.com", "x", "y", "")
	r = call(t, cs, "send_email", noPeriod)
	if !r.isError || r.Error == nil || r.Error.Code != "invalid_intent" {
		t.Errorf("send_email without period or date: %+v %s", r.SendOutput, r.text)
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM sends`); n != 0 {
		t.Errorf("%d sends after refused calls", n)
	}

	// preview_email renders without sending.
	env.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/reminder", Key: env.AdminKey,
		Body: map[string]any{"subject": "Invoice {{.n}}", "text": "Pay {{.n}}, please."}})
	pv, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "preview_email", Arguments: map[string]any{
		"intent": map[string]any{"kind": "invoice_reminder", "reference": "INV-9", "date": "2026-11-29"},
		"to":     []string{"ada@example.com"}, "template_id": "reminder", "variables": map[string]any{"n": "INV-9"},
	}})
	if err != nil || pv.IsError {
		t.Fatalf("preview_email: %v %+v", err, pv)
	}
	var p mcpserver.PreviewOutput
	b, _ := json.Marshal(pv.StructuredContent)
	_ = json.Unmarshal(b, &p)
	if p.Subject != "Invoice INV-9" || p.Text != "Pay INV-9, please." || !p.WouldSend || p.From == "" {
		t.Errorf("preview: %+v", p)
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM sends`); n != 0 {
		t.Errorf("preview stored %d sends", n)
	}
}

func TestMCP_ElicitationConfirms(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	_, secret := agentKey(t, env, app.NewKeyParams{})
	answer := "decline"
	cs := connect(t, env, secret, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if !strings.Contains(req.Params.Message, "erin@example.com") {
				t.Errorf("elicitation message does not show the recipient: %q", req.Params.Message)
			}
			return &mcp.ElicitResult{Action: answer, Content: map[string]any{"confirm": true}}, nil
		},
	}, mcpserver.Config{Confirm: true})
	args := email("erin@example.com", "welcome", "user-9", "2026-11")
	r := call(t, cs, "send_email", args)
	if r.Outcome != "declined" || r.Send != nil {
		t.Fatalf("declined: %+v %s", r.SendOutput, r.text)
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM sends`); n != 0 {
		t.Fatalf("%d sends after a declined confirmation", n)
	}
	answer = "accept"
	r = call(t, cs, "send_email", args)
	if !r.Created {
		t.Fatalf("accepted: %+v %s", r.SendOutput, r.text)
	}
}

func TestMCP_StdioSubprocess(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		key, secret := agentKey(t, env, app.NewKeyParams{})
		cs := connectStdio(t, env, secret)
		checkOneSend(t, env, cs, email("frank@example.com", "invoice_reminder", "INV-5", "2026-11"), "frank@example.com", 5, false)
		checkOneSend(t, env, cs, email("gina@example.com", "invoice_reminder", "INV-6", "2026-11"), "gina@example.com", 5, true)
		r := call(t, cs, "send_email", email("frank@example.com", "invoice_reminder", "INV-5", "2026-12"))
		if !r.Created {
			t.Fatalf("another period: %+v %s", r.SendOutput, r.text)
		}
		if got := sendsOfKey(t, env, key.ID); got != 3 {
			t.Errorf("%d sends, want 3", got)
		}
		r = call(t, cs, "send_email", map[string]any{"to": []string{"frank@example.com"}, "subject": "s", "text": "t"})
		if !r.isError || !strings.Contains(r.text, "intent") {
			t.Errorf("without intent over stdio: %v %q", r.isError, r.text)
		}
	})
}

// metricValue reads one sample of the server's /metrics.
func metricValue(t *testing.T, env *sendoncetest.Env, sample string) float64 {
	t.Helper()
	res, err := http.Get(env.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sample, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", sample)
	return 0
}
