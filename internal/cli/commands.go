package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/buildinfo"
)

// runFunc is one subcommand: its arguments (after its name), the
// environment, and where it writes.
type runFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// usageLine is one line of the help: the synopsis (name and flags;
// "\n" starts a continuation line) and what it does.
type usageLine struct{ synopsis, help string }

// command is one row of the command table: adding a subcommand is adding
// a row, and help lists it.
type command struct {
	name    string
	aliases []string
	usage   []usageLine
	run     runFunc
}

// commands is every subcommand, in the order help lists them.
var commands []command

func init() {
	// Assigned in init: help and version refer to the table themselves.
	commands = []command{
		{name: "serve", run: runServe, usage: []usageLine{{"serve [flags]", "run the API and the delivery workers"}}},
		{name: "keys", run: runKeys, usage: []usageLine{
			{"keys create --name NAME --scopes send,read[,admin] [--tenant T] [--mailbox ID]… [--requires-approval]\n" +
				"[--agent] [--allow-recipient ADDR|DOMAIN]… [--max-per-hour N] [--max-per-day N] [--rate-limit N] [--stream transactional|bulk]", ""},
			{"keys list", "list API keys (never their secrets)"},
			{"keys revoke ID", "revoke a key at once"},
		}},
		{name: "send", run: runSend, usage: []usageLine{{
			"send --to ADDR --subject S --text T|--html-file F|--template ID --var k=v… [--attach FILE]… [--at TIME] [--stream transactional|bulk] [--idempotency-key K] [--json]",
			"send through a running server; without a key, makes one and prints it"}}},
		{name: "cancel", run: runCancel, usage: []usageLine{{"cancel SEND_ID [--json]", "cancel a scheduled, pending or not yet attempted send"}}},
		{name: "status", run: runStatus, usage: []usageLine{{"status SEND_ID [--json]", "a send and its history"}}},
		{name: "sends", run: runSends, usage: []usageLine{{"sends --idempotency-key K [--json]", "find the send made with a key (also --status S, --recipient ADDR, --limit N)"}}},
		{name: "domains", run: runDomains, usage: []usageLine{
			{"domains add DOMAIN [--selector S] [--algorithm rsa2048|ed25519] [--receive] [--catch-all MAILBOX] [--mx-host HOST] [--tenant T]", "make a DKIM key for a domain (and, with --receive, let it receive); prints the DNS records to publish"},
			{"domains list", "list sending domains (never their keys)"},
			{"domains remove DOMAIN", "remove a sending domain and its key"},
		}},
		{name: "inboxes", run: runInboxes, usage: []usageLine{
			{"inboxes create ADDRESS [--name NAME] [--tenant T]", "make ADDRESS, on a domain the tenant added, receive mail (prints the inbox id)"},
			{"inboxes list", "list the addresses that receive"},
			{"inboxes remove ID|ADDRESS", "stop an inbox receiving"},
		}},
		{name: "dns", run: runDNS, usage: []usageLine{{"dns check DOMAIN [--selector S] [--resolver HOST:PORT] [--json]", "check the domain's MX, SPF, DKIM and DMARC records"}}},
		{name: "mcp", run: runMCP, usage: []usageLine{{"mcp [--http ADDR] [--mailbox ID] [--confirm]", "the MCP server for AI agents (stdio; --http: streamable HTTP), with SENDONCE_API_KEY"}}},
		{name: "approvals", run: runApprovals, usage: []usageLine{{"approvals list | approve SEND_ID | reject SEND_ID", "sends waiting for a person's approval (admin key)"}}},
		{name: "suppressions", run: runSuppressions, usage: []usageLine{{"suppressions list [--email ADDR] [--origin O] | add ADDR [--reason R] | remove ADDR", "the suppression list (read key to list, admin to change)"}}},
		{name: "backup", run: runBackup, usage: []usageLine{{"backup --to FILE [--force]", "copy the SQLite database while servers run (PostgreSQL: pg_dump)"}}},
		{name: "migrate", run: runMigrate, usage: []usageLine{
			{"migrate", "apply pending schema migrations (serve does this when it starts)"},
			{"migrate --status", "list applied and pending migrations; apply none"},
		}},
		{name: "healthcheck", run: runHealthcheck, usage: []usageLine{{"healthcheck [--url URL] [--timeout D]", "exit 0 when the server on SENDONCE_ADDR answers /healthz 200 (for container HEALTHCHECKs)"}}},
		{name: "version", aliases: []string{"--version", "-version"}, run: runVersion, usage: []usageLine{{"version [--json]", "print the version and the commit it was built from"}}},
		{name: "help", aliases: []string{"-h", "--help"}, run: runHelp, usage: []usageLine{{"help", "this text"}}},
	}
}

// lookupCommand finds a subcommand by name or alias.
func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name || slices.Contains(c.aliases, name) {
			return c, true
		}
	}
	return command{}, false
}

const usageHeader = `sendonce: the email API that never sends twice.

Usage:
`

const usageFooter = `
Run "sendonce serve -h" for the server's flags; every flag is also an
environment variable (SENDONCE_ADDR, SENDONCE_DB, …), and the flag wins.
send, cancel, status, sends, approvals, suppressions and mcp call SENDONCE_API_URL (default http://127.0.0.1:8787)
with the API key in SENDONCE_API_KEY.
`

// The help's columns: synopses start after "  sendonce ", descriptions at
// helpColumn, on the synopsis's line when it fits and below it otherwise.
const (
	synopsisIndent = "  sendonce "
	helpColumn     = 38
)

// usageText is the help, generated from the command table.
func usageText() string {
	var b strings.Builder
	b.WriteString(usageHeader)
	for _, c := range commands {
		for _, u := range c.usage {
			lines := strings.Split(u.synopsis, "\n")
			b.WriteString(synopsisIndent + lines[0])
			// Continuation lines line up with the space before the first
			// flag.
			cont := strings.Repeat(" ", len(synopsisIndent)+max(strings.Index(lines[0], " --"), 0))
			for _, l := range lines[1:] {
				b.WriteString("\n" + cont + l)
			}
			if u.help != "" {
				last := len(synopsisIndent) + len(lines[0])
				if len(lines) > 1 || last > helpColumn-2 {
					b.WriteString("\n")
					last = 0
				}
				b.WriteString(strings.Repeat(" ", helpColumn-last) + u.help)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString(usageFooter)
	return b.String()
}

// runVersion prints the binary's version and the commit it was built
// from; --json prints them as an object (buildinfo.Info).
func runVersion(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("version", getenv, stderr)
	asJSON := e.fs.Bool("json", false, "print an object: version, revision, time, modified, go")
	if err := e.fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	in := buildinfo.Read(Version)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(in)
	}
	fmt.Fprintln(stdout, "sendonce", in)
	return nil
}

func runHelp(_ context.Context, _ []string, _ func(string) string, stdout, _ io.Writer) error {
	fmt.Fprint(stdout, usageText())
	return nil
}
