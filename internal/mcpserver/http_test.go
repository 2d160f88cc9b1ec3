package mcpserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/cli"
	"github.com/sendonce/sendonce/internal/mcpserver"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCP_HTTPNeedsTheBearerToken: the streamable HTTP endpoint acts with
// the agent's API key, so it serves only callers with the token.
func TestMCP_HTTPNeedsTheBearerToken(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	_, secret := agentKey(t, env, app.NewKeyParams{})
	srv, err := mcpserver.New(mcpserver.Config{BaseURL: env.URL, APIKey: secret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.HTTPHandler("short"); err == nil {
		t.Fatal("HTTPHandler took a short token")
	}
	token := strings.Repeat("k", mcpserver.MinHTTPTokenLen)
	h, err := srv.HTTPHandler(token)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()

	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, auth := range []string{"", "Bearer ", "Bearer " + token + "x", "Basic " + token, token} {
		req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d %s, want 401", auth, resp.StatusCode, body)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: bearer{token}}, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("ListTools: %v %v", tools, err)
	}
}

// TestMCP_HTTPRefusesToStartWithoutToken: sendonce mcp --http without
// SENDONCE_MCP_TOKEN is a usage error, not an open endpoint.
func TestMCP_HTTPRefusesToStartWithoutToken(t *testing.T) {
	env := map[string]string{"SENDONCE_API_KEY": "sk_test"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cli.Run(ctx, []string{"mcp", "--http", "127.0.0.1:0", "--api-url", "http://127.0.0.1:1"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "SENDONCE_MCP_TOKEN") {
		t.Fatalf("Run = %v, want a usage error naming SENDONCE_MCP_TOKEN", err)
	}
}
