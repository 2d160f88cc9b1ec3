package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/client"
)

// runApprovals lists, approves and rejects sends waiting in
// pending_approval, through a running server (SENDONCE_API_URL) with an
// admin key in SENDONCE_API_KEY.
func runApprovals(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const use = "approvals list | approve SEND_ID | reject SEND_ID"
	e, err := subcommandFlags("approvals", args, use, getenv, stderr)
	if err != nil {
		return err
	}
	var api apiFlags
	api.define(e)
	pos, err := parseInterleaved(e, args[1:])
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		if len(pos) != 0 {
			return fmt.Errorf("%w: approvals list", ErrUsage)
		}
		c, err := api.client(getenv)
		if err != nil {
			return err
		}
		l, err := c.ListSends(ctx, &client.ListSendsParams{Status: client.StatusPendingApproval, Limit: 100})
		if err != nil {
			return err
		}
		if api.json {
			return printRaw(stdout, l.Raw)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCREATED\tFROM\tTO\tSUBJECT")
		for _, s := range l.Data {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%q\n", s.ID, s.CreatedAt.Format(time.RFC3339), s.From, strings.Join(s.To, ","), s.Subject)
		}
		return tw.Flush()
	case "approve", "reject":
		if len(pos) != 1 {
			return fmt.Errorf("%w: approvals %s SEND_ID", ErrUsage, args[0])
		}
		c, err := api.client(getenv)
		if err != nil {
			return err
		}
		// One key per decision, so that a retried approval is a replay.
		opts := keyOptions("approvals-" + args[0] + "-" + pos[0])
		var s *client.Send
		if args[0] == "approve" {
			s, err = c.Approve(ctx, pos[0], opts)
		} else {
			s, err = c.Reject(ctx, pos[0], opts)
		}
		if err != nil {
			return err
		}
		return printSend(stdout, api.json, s)
	}
	return fmt.Errorf("%w: %s", ErrUsage, use)
}
