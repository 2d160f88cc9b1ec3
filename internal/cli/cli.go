// Package cli is the sendonce command line: serve, keys, help, version.
// main calls Run and nothing else, so tests run the whole program in
// process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
)

// Version is set at build time with -ldflags "-X …/internal/cli.Version=…".
var Version = ""

const usage = `sendonce: the email API that never sends twice.

Usage:
  sendonce serve [flags]              run the API and the delivery workers
  sendonce keys create --name NAME --scopes send,read[,admin] [--tenant T] [--mailbox ID]… [--requires-approval]
                      [--agent] [--allow-recipient ADDR|DOMAIN]… [--max-per-hour N] [--max-per-day N]
  sendonce keys list                  list API keys (never their secrets)
  sendonce keys revoke ID             revoke a key at once
  sendonce send --to ADDR --subject S --text T|--html-file F|--template ID --var k=v… [--attach FILE]… [--at TIME]
               [--idempotency-key K] [--json]
                                      send through a running server; without a key, makes one and prints it
  sendonce cancel SEND_ID [--json]    cancel a scheduled, pending or not yet attempted send
  sendonce status SEND_ID [--json]    a send and its history
  sendonce sends --idempotency-key K [--json]
                                      find the send made with a key (also --status S, --limit N)
  sendonce domains add DOMAIN [--selector S] [--algorithm rsa2048|ed25519] [--tenant T]
                                      make a DKIM key for a sending domain; prints the DNS records to publish
  sendonce domains list               list sending domains (never their keys)
  sendonce domains remove DOMAIN      remove a sending domain and its key
  sendonce dns check DOMAIN [--selector S] [--resolver HOST:PORT] [--json]
                                      check the domain's MX, SPF, DKIM and DMARC records
  sendonce mcp [--http ADDR] [--mailbox ID] [--confirm]
                                      the MCP server for AI agents (stdio; --http: streamable HTTP), with SENDONCE_API_KEY
  sendonce approvals list | approve SEND_ID | reject SEND_ID
                                      sends waiting for a person's approval (admin key)
  sendonce version                    print the version
  sendonce help                       this text

Run "sendonce serve -h" for the server's flags; every flag is also an
environment variable (SENDONCE_ADDR, SENDONCE_DB, …), and the flag wins.
send, cancel, status, sends, approvals and mcp call SENDONCE_API_URL (default http://127.0.0.1:8787)
with the API key in SENDONCE_API_KEY.
`

// ErrUsage marks errors that are the caller's wording; main exits 2.
var ErrUsage = errors.New("usage")

// Run runs the command in args (without the program name).
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: no command given", ErrUsage)
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], getenv, stdout, stderr)
	case "keys":
		return runKeys(ctx, args[1:], getenv, stdout, stderr)
	case "send":
		return runSend(ctx, args[1:], getenv, stdout, stderr)
	case "status":
		return runStatus(ctx, args[1:], getenv, stdout, stderr)
	case "sends":
		return runSends(ctx, args[1:], getenv, stdout, stderr)
	case "cancel":
		return runCancel(ctx, args[1:], getenv, stdout, stderr)
	case "domains":
		return runDomains(ctx, args[1:], getenv, stdout, stderr)
	case "dns":
		return runDNS(ctx, args[1:], getenv, stdout, stderr)
	case "mcp":
		return runMCP(ctx, args[1:], getenv, stdout, stderr)
	case "approvals":
		return runApprovals(ctx, args[1:], getenv, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "sendonce", version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%w: unknown command %q", ErrUsage, args[0])
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func newFlags(name string, getenv func(string) string, stderr io.Writer) *envFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &envFlags{fs: fs, getenv: getenv}
}

func parse(e *envFlags, args []string) error {
	if err := e.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return e.err()
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
