package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/client"
)

// The client commands (send, status, sends) talk to a running server with
// the public client package, like any other caller.

const defaultAPIURL = "http://127.0.0.1:8787"

// apiFlags are shared by the client commands.
type apiFlags struct {
	url  string
	json bool
}

func (a *apiFlags) define(e *envFlags) {
	e.str(&a.url, "api-url", "SENDONCE_API_URL", defaultAPIURL, "the sendonce server")
	e.fs.BoolVar(&a.json, "json", false, "print the API's JSON object instead of a summary")
}

// newAPIClient builds a client. The key comes only from the environment: a
// flag would show it in the process list.
func (a *apiFlags) client(getenv func(string) string) (*client.Client, error) {
	key := getenv("SENDONCE_API_KEY")
	if key == "" {
		return nil, fmt.Errorf("%w: set SENDONCE_API_KEY to an API key (sendonce keys create …)", ErrUsage)
	}
	c, err := client.New(client.Config{BaseURL: a.url, APIKey: key, Timeout: 30 * time.Second, MaxAttempts: 4, MaxElapsed: 2 * time.Minute})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return c, nil
}

type kvFlag map[string]string

func (m kvFlag) String() string { return "" }
func (m kvFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	m[k] = val
	return nil
}

func readFileFlag(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	var (
		b   []byte
		err error
	)
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return string(b), nil
}

// sendFlags are send's flags.
type sendFlags struct {
	api                                     apiFlags
	to, cc, bcc, replyTo                    multiFlag
	from, mailbox, subject, text, html, tpl string
	textFile, htmlFile, key                 string
	vars, tags                              kvFlag
	attach                                  multiFlag // files to attach
	at                                      string    // --at: when to send
	stream                                  string    // --stream: "" for the key's default
}

func (f *sendFlags) define(e *envFlags) {
	f.vars, f.tags = kvFlag{}, kvFlag{}
	f.api.define(e)
	e.fs.Var(&f.to, "to", "recipient (repeatable; at least one)")
	e.fs.Var(&f.cc, "cc", "Cc recipient (repeatable)")
	e.fs.Var(&f.bcc, "bcc", "Bcc recipient (repeatable)")
	e.fs.Var(&f.replyTo, "reply-to", "Reply-To address (repeatable)")
	e.fs.StringVar(&f.from, "from", "", "From address (default: the mailbox's)")
	e.fs.StringVar(&f.mailbox, "mailbox", "", "mailbox id (default: default)")
	e.fs.StringVar(&f.subject, "subject", "", "subject (required unless --template)")
	e.fs.StringVar(&f.text, "text", "", "plain-text body")
	e.fs.StringVar(&f.textFile, "text-file", "", "read the plain-text body from a file (- for stdin)")
	e.fs.StringVar(&f.html, "html", "", "HTML body")
	e.fs.StringVar(&f.htmlFile, "html-file", "", "read the HTML body from a file (- for stdin)")
	e.fs.StringVar(&f.tpl, "template", "", "render the stored template with this id")
	e.fs.Var(f.vars, "var", "template variable name=value (repeatable)")
	e.fs.Var(f.tags, "tag", "tag name=value kept on the send (repeatable)")
	e.fs.StringVar(&f.key, "idempotency-key", "", "the send's key; reuse it to retry safely (default: a new UUID, printed)")
	e.fs.Var(&f.attach, "attach", "attach this file (repeatable; its name is the file's base name, its type from the extension)")
	e.fs.StringVar(&f.stream, "stream", "", "transactional or bulk (default: the API key's default stream, else transactional)")
	e.fs.StringVar(&f.at, "at", "", "send at this RFC 3339 time (e.g. 2026-12-24T18:00:00+01:00) instead of now; at most 30 days ahead")
}

// complete checks the flags against each other and reads the body files.
func (f *sendFlags) complete() error {
	if len(f.to) == 0 {
		return fmt.Errorf("%w: --to is required", ErrUsage)
	}
	if f.text != "" && f.textFile != "" || f.html != "" && f.htmlFile != "" {
		return fmt.Errorf("%w: give --text or --text-file, --html or --html-file, not both", ErrUsage)
	}
	var err error
	if f.textFile != "" {
		if f.text, err = readFileFlag(f.textFile); err != nil {
			return err
		}
	}
	if f.htmlFile != "" {
		if f.html, err = readFileFlag(f.htmlFile); err != nil {
			return err
		}
	}
	if f.tpl == "" && (f.subject == "" || f.text == "" && f.html == "") {
		return fmt.Errorf("%w: give --subject and --text, --text-file, --html or --html-file; or --template ID", ErrUsage)
	}
	if f.tpl == "" && len(f.vars) > 0 {
		return fmt.Errorf("%w: --var needs --template", ErrUsage)
	}
	if f.key != "" {
		if err := client.ValidateIdempotencyKey(f.key); err != nil {
			return fmt.Errorf("%w: --idempotency-key: %v", ErrUsage, err)
		}
	}
	return nil
}

func (f *sendFlags) request() (*client.SendRequest, error) {
	req := &client.SendRequest{To: f.to, Cc: f.cc, Bcc: f.bcc, ReplyTo: f.replyTo, From: f.from, MailboxID: f.mailbox,
		Subject: f.subject, Text: f.text, HTML: f.html, TemplateID: f.tpl, Stream: client.Stream(f.stream)}
	if err := addAttachmentsAndTime(req, f.attach, f.at); err != nil {
		return nil, err
	}
	if len(f.vars) > 0 {
		req.Variables = make(map[string]any, len(f.vars))
		for k, v := range f.vars {
			req.Variables[k] = v
		}
	}
	if len(f.tags) > 0 {
		req.Tags = f.tags
	}
	return req, nil
}

func runSend(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("send", getenv, stderr)
	var f sendFlags
	f.define(e)
	pos, err := parseInterleaved(e, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: send takes no arguments, only flags (got %q)", ErrUsage, pos[0])
	}
	if err := f.complete(); err != nil {
		return err
	}
	c, err := f.api.client(getenv)
	if err != nil {
		return err
	}
	req, err := f.request()
	if err != nil {
		return err
	}
	key := f.key
	if key == "" {
		// Made and shown before the call, so that even a run killed
		// mid-request leaves the key on the screen.
		key = client.NewIdempotencyKey()
		fmt.Fprintf(stderr, "No --idempotency-key given: this send uses the new key %s\n"+
			"To retry it safely, run the same command with --idempotency-key %s: sendonce accepts\n"+
			"each key once. Running it again without the key would send a second email.\n", key, key)
	}
	s, err := c.Send(ctx, req, &client.SendOptions{IdempotencyKey: key})
	if err != nil {
		return sendError(err, key)
	}
	if f.api.json {
		return printRaw(stdout, s.Raw)
	}
	note := "accepted"
	if s.Replayed {
		note = "already accepted earlier with this key; nothing was sent again"
	}
	fmt.Fprintf(stdout, "%s %s (%s)\n", s.ID, s.Status, note)
	fmt.Fprintf(stdout, "  to:      %s\n  subject: %s\n  key:     %s\n", strings.Join(s.To, ", "), s.Subject, s.IdempotencyKey)
	fmt.Fprintf(stdout, "Follow it with: sendonce status %s\n", s.ID)
	return nil
}

// addAttachmentsAndTime reads the --attach files and --at into req.
func addAttachmentsAndTime(req *client.SendRequest, files []string, at string) error {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("--attach: %w", err)
		}
		req.Attachments = append(req.Attachments, client.Attachment{Filename: filepath.Base(f), Content: data})
	}
	if at != "" {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return fmt.Errorf("%w: --at must be an RFC 3339 time with an offset, e.g. 2026-12-24T18:00:00+01:00", ErrUsage)
		}
		req.ScheduledAt = &t
	}
	return nil
}

// sendIDCommand parses the flags of a command that takes one SEND_ID and
// talks to the server: its client, its API flags and the id.
func sendIDCommand(name string, args []string, getenv func(string) string, stderr io.Writer) (*client.Client, apiFlags, []string, error) {
	e := newFlags(name, getenv, stderr)
	var api apiFlags
	api.define(e)
	pos, err := positional(e, args, 1, name+" SEND_ID")
	if err != nil {
		return nil, api, nil, err
	}
	c, err := api.client(getenv)
	return c, api, pos, err
}

// runCancel cancels a send that was never attempted.
func runCancel(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, api, pos, err := sendIDCommand("cancel", args, getenv, stderr)
	if err != nil {
		return err
	}
	// One key per send, so that a retried cancel is a replay.
	s, err := c.Cancel(ctx, pos[0], keyOptions("cancel-"+pos[0]))
	if client.ErrorCode(err) == "invalid_state" {
		return fmt.Errorf("%w\nThe send was already attempted (or finished): it can no longer be canceled", err)
	}
	if err != nil {
		return err
	}
	return printSend(stdout, api.json, s)
}

// keyOptions makes a retried command a replay: the call's Idempotency-Key
// is key, unless key is too long to be one (the call then goes unkeyed).
func keyOptions(key string) *client.CallOptions {
	if len(key) > client.MaxKeyLen {
		return nil
	}
	return &client.CallOptions{IdempotencyKey: key}
}

// printSend prints the send as the server answered it (JSON) or as its id
// and status.
func printSend(w io.Writer, asJSON bool, s *client.Send) error {
	if asJSON {
		return printRaw(w, s.Raw)
	}
	_, err := fmt.Fprintf(w, "%s %s\n", s.ID, s.Status)
	return err
}

// sendError explains a failed send in terms of what the caller may do next.
func sendError(err error, key string) error {
	var e *client.Error
	switch {
	case client.ErrorCode(err) == client.CodeKeyReused:
		return fmt.Errorf("%w\nThe key %s was already used with different content, and nothing was sent now. "+
			"To retry that email, send its original content with the key; for a new email, use a new key", err, key)
	case errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden):
		return fmt.Errorf("%w\nNothing was sent, and the key %s was not used: fix SENDONCE_API_KEY, then retry with --idempotency-key %s", err, key, key)
	case client.IsRejected(err):
		return fmt.Errorf("%w\nThe server refused the send; nothing was sent. Fix the request; the key %s now answers with this refusal, so a corrected email needs a new key", err, key)
	case client.IsOutcomeUnknown(err):
		return fmt.Errorf("%w\nThe outcome is unknown: the email may or may not have been accepted. Do not send it again with a new key.\n"+
			"Look it up:      sendonce sends --idempotency-key %s\n"+
			"or retry safely: the same command with --idempotency-key %s", err, key, key)
	}
	return err
}

func printRaw(w io.Writer, raw []byte) error {
	s := strings.TrimRight(string(raw), "\n")
	_, err := fmt.Fprintln(w, s)
	return err
}

func runStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, api, pos, err := sendIDCommand("status", args, getenv, stderr)
	if err != nil {
		return err
	}
	s, err := c.GetSend(ctx, pos[0])
	if err != nil {
		return err
	}
	if api.json {
		return printRaw(stdout, s.Raw)
	}
	fmt.Fprintf(stdout, "%s %s\n", s.ID, s.Status)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	row := func(name, v string) {
		if v != "" {
			fmt.Fprintf(tw, "  %s:\t%s\n", name, v)
		}
	}
	row("to", strings.Join(s.To, ", "))
	row("cc", strings.Join(s.Cc, ", "))
	row("from", s.From)
	row("subject", s.Subject)
	row("template", s.TemplateID)
	row("key", s.IdempotencyKey)
	row("message-id", s.MessageID)
	row("attempts", fmt.Sprint(s.Attempts))
	row("last error", s.LastError)
	row("created", s.CreatedAt.Format(time.RFC3339))
	if s.SentAt != nil {
		row("sent", s.SentAt.Format(time.RFC3339))
	}
	if len(s.Events) > 0 {
		fmt.Fprintln(tw, "  events:")
		for _, ev := range s.Events {
			fmt.Fprintf(tw, "    %s\t%s\t%s\n", ev.At.Format(time.RFC3339), ev.Type, ev.Detail)
		}
	}
	if s.Status == client.StatusUnknown {
		fmt.Fprintf(tw, "The handoff's outcome is unknown; it is not retried by itself. Check the recipient side, then\n"+
			"POST /v1/sends/%s/reconcile with outcome sent, failed or resend.\n", s.ID)
	}
	return tw.Flush()
}

func runSends(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("sends", getenv, stderr)
	var (
		api    apiFlags
		key    string
		status string
		rcpt   string
		after  string
		limit  int
	)
	api.define(e)
	e.fs.StringVar(&key, "idempotency-key", "", "find the send made with this key")
	e.fs.StringVar(&status, "status", "", "only sends in this status")
	e.fs.StringVar(&rcpt, "recipient", "", "only sends with this address in to, cc or bcc")
	e.fs.IntVar(&limit, "limit", 20, "at most this many (1-100)")
	e.fs.StringVar(&after, "after", "", "the cursor printed by the previous page")
	pos, err := parseInterleaved(e, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: sends takes only flags (got %q)", ErrUsage, pos[0])
	}
	if key != "" {
		if err := client.ValidateIdempotencyKey(key); err != nil {
			return fmt.Errorf("%w: --idempotency-key: %v", ErrUsage, err)
		}
	}
	c, err := api.client(getenv)
	if err != nil {
		return err
	}
	l, err := c.ListSends(ctx, &client.ListSendsParams{IdempotencyKey: key, Status: client.Status(status),
		Recipient: rcpt, Limit: limit, After: after})
	if err != nil {
		return err
	}
	if api.json {
		return printRaw(stdout, l.Raw)
	}
	if len(l.Data) == 0 {
		if key != "" {
			fmt.Fprintf(stdout, "No send has the key %s: no request with it was accepted.\n"+
				"Sending with this same key is safe; it cannot make a second email.\n", key)
			return nil
		}
		fmt.Fprintln(stdout, "No sends.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tTO\tSUBJECT\tKEY\tCREATED")
	for _, s := range l.Data {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Status, strings.Join(s.To, ", "), s.Subject, s.IdempotencyKey, s.CreatedAt.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.Next != "" {
		more := ""
		if rcpt != "" {
			more = " --recipient " + rcpt
		}
		fmt.Fprintf(stdout, "More: sendonce sends%s --limit %d --after %s\n", more, limit, l.Next)
	}
	return nil
}
