package mcpserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/mcpserver"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// tsClientDir holds the official MCP TypeScript SDK, pinned
// (package-lock.json; .ci/run installs it).
const tsClientDir = "testdata/ts-client"

// TestMCP_ElicitationWithTheTypeScriptSDK: the same approval, with the
// official TypeScript SDK as the host of `sendonce mcp` over stdio:
// accept delivers the held send once, decline cancels it, a host without
// the capability leaves it pending_approval. Without node or the
// installed SDK it skips locally and fails in CI.
func TestMCP_ElicitationWithTheTypeScriptSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the MCP TypeScript SDK is missing (npm ci --prefix internal/mcpserver/%s): %v", tsClientDir, err)
		}
		t.Skipf("the MCP TypeScript SDK is not installed: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	_, secret := agentKey(t, env, app.NewKeyParams{RequiresApproval: true})
	run := func(answer, to, ref string) (asked []string, out mcpserver.SendOutput) {
		t.Helper()
		command, _ := json.Marshal([]string{exe, "mcp", "--api-url", env.URL})
		args, _ := json.Marshal(email(to, "welcome", ref, "2026-12"))
		cmd := exec.Command(node, "approve.mjs")
		cmd.Dir = tsClientDir
		cmd.Env = append(os.Environ(), cliEnv+"=1", "SENDONCE_API_KEY="+secret, "ELICIT_ANSWER="+answer,
			"SENDONCE_MCP_COMMAND="+string(command), "TOOL_ARGS="+string(args))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		done := make(chan struct{})
		timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill(); close(done) })
		b, err := cmd.Output()
		timer.Stop()
		select {
		case <-done:
			t.Fatalf("%s: the TypeScript host did not finish in 60 s\n%s", answer, stderr.String())
		default:
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", answer, err, stderr.String())
		}
		var seen struct {
			Asked  []string             `json:"asked"`
			Result mcpserver.SendOutput `json:"result"`
		}
		if err := json.Unmarshal(b, &seen); err != nil {
			t.Fatalf("%s: %v: %s", answer, err, b)
		}
		return seen.Asked, seen.Result
	}

	asked, out := run("accept", "hana@example.com", "user-21")
	if len(asked) != 1 || !strings.Contains(asked[0], "hana@example.com") || out.Outcome != "approved" || out.Send == nil {
		t.Fatalf("accept: asked %q, %+v", asked, out)
	}
	env.WaitStatus(t, out.Send.ID, 10*time.Second, core.StatusSent)
	if got := delivered(env, "hana@example.com"); got != 1 {
		t.Fatalf("accept: %d messages delivered, want 1", got)
	}

	asked, out = run("decline", "ivan@example.com", "user-22")
	if len(asked) != 1 || out.Outcome != "declined" || out.Send == nil || out.Send.Status != "canceled" {
		t.Fatalf("decline: asked %q, %+v", asked, out)
	}

	asked, out = run("none", "jon@example.com", "user-23")
	if len(asked) != 0 || !out.AwaitingApproval || out.Send == nil || out.Send.Status != "pending_approval" {
		t.Fatalf("no capability: asked %q, %+v", asked, out)
	}
	time.Sleep(300 * time.Millisecond) // 15 worker polls
	if got := delivered(env, "ivan@example.com") + delivered(env, "jon@example.com"); got != 0 {
		t.Fatalf("%d messages delivered that the person declined or never approved", got)
	}
}
