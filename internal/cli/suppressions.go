package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/client"
)

const suppressionsUsage = "suppressions list [--email ADDR] [--origin bounce|complaint|manual] [--limit N] [--after CURSOR] | suppressions add ADDR [--reason R] | suppressions remove ADDR"

// runSuppressions lists and changes the tenant's suppression list through
// a running server (SENDONCE_API_URL; SENDONCE_API_KEY: read to list,
// admin to change).
func runSuppressions(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := subcommandFlags("suppressions", args, suppressionsUsage, getenv, stderr)
	if err != nil {
		return err
	}
	var api apiFlags
	api.define(e)
	var p client.ListSuppressionsParams
	var reason string
	switch args[0] {
	case "list":
		e.fs.StringVar(&p.Email, "email", "", "only this address")
		e.fs.StringVar(&p.Origin, "origin", "", "only entries from bounce, complaint, manual or unsubscribe")
		e.fs.IntVar(&p.Limit, "limit", 0, "entries per page, 1 to 100 (default 20)")
		e.fs.StringVar(&p.After, "after", "", "cursor: the next of the previous page")
	case "add":
		e.fs.StringVar(&reason, "reason", "", "why (one line)")
	case "remove":
	default:
		return fmt.Errorf("%w: %s", ErrUsage, suppressionsUsage)
	}
	pos, err := positional(e, args[1:], map[string]int{"list": 0, "add": 1, "remove": 1}[args[0]], suppressionsUsage)
	if err != nil {
		return err
	}
	c, err := api.client(getenv)
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		l, err := c.ListSuppressions(ctx, &p)
		if err != nil {
			return err
		}
		if api.json {
			return json.NewEncoder(stdout).Encode(l)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EMAIL\tORIGIN\tSEND\tCREATED\tREASON")
		for _, s := range l.Data {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Email, s.Origin, dash(s.SendID), s.CreatedAt.Format(time.RFC3339), s.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if l.Next != "" {
			fmt.Fprintf(stdout, "more: --after %s\n", l.Next)
		}
		return nil
	case "add":
		// One key per address: a retried add is a replay.
		opts := &client.CallOptions{IdempotencyKey: "suppressions-add-" + pos[0]}
		if len(opts.IdempotencyKey) > client.MaxKeyLen || client.ValidateIdempotencyKey(opts.IdempotencyKey) != nil {
			opts = nil
		}
		s, err := c.AddSuppression(ctx, pos[0], reason, opts)
		if err != nil {
			return err
		}
		if api.json {
			return json.NewEncoder(stdout).Encode(s)
		}
		if s.Created {
			fmt.Fprintf(stdout, "%s suppressed\n", s.Email)
		} else {
			fmt.Fprintf(stdout, "%s was suppressed already (%s, %s)\n", s.Email, s.Origin, s.Reason)
		}
		return nil
	}
	if err := c.DeleteSuppression(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s removed from the suppression list\n", pos[0])
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
