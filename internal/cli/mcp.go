package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sendonce/sendonce/internal/mcpserver"
)

// runMCP serves the MCP tools: over stdio by default, over streamable HTTP
// with --http ADDR. It calls a sendonce server (--api-url) with the agent's
// key from SENDONCE_API_KEY; it opens no database. Over HTTP, callers must
// present SENDONCE_MCP_TOKEN as a bearer token: the endpoint acts with the
// agent's key. The token is an environment variable only, as a flag it
// would show in process lists.
func runMCP(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("mcp", getenv, stderr)
	var (
		apiURL, httpAddr, mailbox, logLevel string
		confirm                             bool
	)
	e.str(&apiURL, "api-url", "SENDONCE_API_URL", defaultAPIURL, "the sendonce server")
	e.str(&httpAddr, "http", "SENDONCE_MCP_HTTP", "", "serve streamable HTTP on this address instead of stdio; callers must send SENDONCE_MCP_TOKEN as a bearer token")
	e.str(&mailbox, "mailbox", "SENDONCE_MAILBOX", "default", "the mailbox the agent sends from")
	e.boolean(&confirm, "confirm", "SENDONCE_MCP_CONFIRM", false, "ask the person to confirm each new send (MCP elicitation), when the host supports it")
	e.str(&logLevel, "log-level", "SENDONCE_LOG_LEVEL", "warn", "debug, info, warn or error (logs go to standard error)")
	if err := parse(e, args); err != nil {
		return err
	}
	key := getenv("SENDONCE_API_KEY")
	if key == "" {
		return fmt.Errorf("%w: set SENDONCE_API_KEY to the agent's API key (sendonce keys create --agent …)", ErrUsage)
	}
	logger, err := newLogger(stderr, "text", logLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	srv, err := mcpserver.New(mcpserver.Config{BaseURL: apiURL, APIKey: key, Mailbox: mailbox, Confirm: confirm, Version: version(), Logger: logger})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if httpAddr == "" {
		return srv.RunStdio(ctx)
	}
	handler, err := srv.HTTPHandler(getenv("SENDONCE_MCP_TOKEN"))
	if err != nil {
		return fmt.Errorf("%w: %v: set SENDONCE_MCP_TOKEN (for example to the output of: openssl rand -hex 32); MCP hosts send it as Authorization: Bearer", ErrUsage, err)
	}
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", httpAddr, err)
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "sendonce mcp: streamable HTTP on http://%s/\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
