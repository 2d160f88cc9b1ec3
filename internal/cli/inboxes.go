package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

const inboxesUsage = "inboxes create ADDRESS [--name NAME] [--tenant T] | inboxes list [--tenant T] | inboxes remove ID|ADDRESS [--tenant T]"

// runInboxes makes, lists and removes receiving addresses in the database,
// as `domains` does: the same app rule as POST /v1/inboxes (the address
// must be on a domain the tenant added and nobody else receives on).
func runInboxes(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := subcommandFlags("inboxes", args, inboxesUsage, getenv, stderr)
	if err != nil {
		return err
	}
	var dsn, tenant, name string
	dbFlag(e, &dsn)
	e.fs.StringVar(&tenant, "tenant", "default", "tenant the inbox belongs to")
	if args[0] == "create" {
		e.fs.StringVar(&name, "name", "", "display name of the inbox")
	}
	n, ok := map[string]int{"create": 1, "list": 0, "remove": 1}[args[0]]
	pos, err := positional(e, args[1:], n, inboxesUsage)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrUsage, inboxesUsage)
	}
	store, err := openStore(ctx, dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	svc := app.New(store, app.Config{}, nil)
	// The CLI acts for the whole tenant, as an unrestricted admin key.
	key := &core.APIKey{Tenant: tenant, Scopes: []core.Scope{core.ScopeRead, core.ScopeAdmin}}
	switch args[0] {
	case "create":
		var m *core.Mailbox
		err := store.InTx(ctx, func(tx core.Tx) error {
			var err error
			m, err = svc.CreateInbox(ctx, tx, tenant, pos[0], name)
			return err
		})
		if err != nil {
			return fmt.Errorf("create inbox %s: %w", pos[0], err)
		}
		domain := m.Address[strings.LastIndexByte(m.Address, '@')+1:]
		fmt.Fprintf(stdout, "%s\t%s\n", m.ID, m.Address)
		fmt.Fprintf(stderr, "mail for %s arrives once a server runs with --inbound-addr and %s's MX record names it (sendonce domains add %s --receive prints the record)\n",
			m.Address, domain, domain)
		return nil
	case "list":
		ins, err := svc.ListInboxes(ctx, key)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tADDRESSES\tNAME\tCREATED")
		for _, in := range ins {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", in.Mailbox.ID, strings.Join(in.Addresses, ","), in.Mailbox.Name, in.Mailbox.CreatedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	default: // remove
		in, err := svc.InboxByRef(ctx, key, pos[0])
		if err == nil {
			err = svc.RemoveInbox(ctx, key, in.Mailbox.ID)
		}
		if err != nil {
			return fmt.Errorf("remove inbox %s: %w", pos[0], err)
		}
		fmt.Fprintln(stderr, "removed", in.Mailbox.ID, "(its addresses no longer receive)")
		return nil
	}
}
