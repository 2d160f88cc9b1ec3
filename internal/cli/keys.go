package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runKeys(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := subcommandFlags("keys", args, "keys create|list|revoke", getenv, stderr)
	if err != nil {
		return err
	}
	var dsn string
	dbFlag(e, &dsn)
	// Each subcommand defines its own flags on e and parses args[1:]; dsn
	// is read after that parse, hence the pointer.
	switch args[0] {
	case "create":
		return keysCreate(ctx, e, &dsn, args, stdout, stderr)
	case "list":
		return keysList(ctx, e, &dsn, args, stdout, stderr)
	case "revoke":
		return keysRevoke(ctx, e, &dsn, args, stdout, stderr)
	}
	return fmt.Errorf("%w: keys create|list|revoke", ErrUsage)
}

func keysCreate(ctx context.Context, e *envFlags, dsn *string, args []string, stdout, stderr io.Writer) error {
	var (
		name, scopes, tenant string
		mailboxes            multiFlag
		approval             bool
	)
	e.fs.StringVar(&name, "name", "", "a name for the key (required)")
	e.fs.StringVar(&scopes, "scopes", "", "comma-separated scopes: send, read, admin (required)")
	e.fs.StringVar(&tenant, "tenant", "default", "tenant the key belongs to")
	e.fs.Var(&mailboxes, "mailbox", "mailbox the key may send from (repeatable; none means any)")
	e.fs.BoolVar(&approval, "requires-approval", false, "sends made with this key wait for approval")
	var (
		agentKey        bool
		allow           multiFlag
		perHour, perDay int
		rateLimit       int
		stream          string
	)
	e.fs.BoolVar(&agentKey, "agent", false, "a key for an AI agent: scopes send,read, one mailbox (default: default), approval on, no bcc/from/headers, audited")
	e.fs.Var(&allow, "allow-recipient", "an address or domain the key may mail (repeatable; none means any)")
	e.fs.IntVar(&perHour, "max-per-hour", 0, "most sends the key may create per sliding hour (0: no cap)")
	e.fs.IntVar(&perDay, "max-per-day", 0, "most sends the key may create per sliding day (0: no cap)")
	e.fs.IntVar(&rateLimit, "rate-limit", 0, "requests the key may make per the server's --rate-limit-window (0: the server's --rate-limit; -1: no limit)")
	e.fs.StringVar(&stream, "stream", "", "the stream of the key's sends that name none: transactional (default) or bulk")
	if err := parse(e, args[1:]); err != nil {
		return err
	}
	if stream != "" && !core.Stream(stream).Valid() {
		return fmt.Errorf("%w: --stream is transactional or bulk", ErrUsage)
	}
	if agentKey {
		if err := agentDefaults(e, &scopes, &mailboxes, &approval); err != nil {
			return err
		}
	}
	sc, err := core.ParseScopes(scopes)
	if err != nil {
		return fmt.Errorf("%w: --scopes: %v", ErrUsage, err)
	}
	if name == "" {
		return fmt.Errorf("%w: --name is required", ErrUsage)
	}
	store, err := openStore(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	svc := app.New(store, app.Config{}, nil)
	_, secret, err := svc.CreateKey(ctx, app.NewKeyParams{Name: name, Tenant: tenant, Scopes: sc, Mailboxes: mailboxes, RequiresApproval: approval,
		Agent: agentKey, AllowRecipients: allow, MaxPerHour: perHour, MaxPerDay: perDay, RateLimit: rateLimit, DefaultStream: core.Stream(stream)})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, secret)
	return nil
}

func keysList(ctx context.Context, e *envFlags, dsn *string, args []string, stdout, stderr io.Writer) error {
	if err := parse(e, args[1:]); err != nil {
		return err
	}
	store, err := openStore(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	keys, err := store.ListAPIKeys(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tNAME\tSCOPES\tMAILBOXES\tAPPROVAL\tCREATED\tREVOKED")
	for _, k := range keys {
		scopes := make([]string, len(k.Scopes))
		for i, s := range k.Scopes {
			scopes[i] = string(s)
		}
		mb := strings.Join(k.Mailboxes, ",")
		if mb == "" {
			mb = "*"
		}
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = k.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", k.ID, k.Tenant, k.Name, strings.Join(scopes, ","), mb,
			k.RequiresApproval, k.CreatedAt.Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

func keysRevoke(ctx context.Context, e *envFlags, dsn *string, args []string, stdout, stderr io.Writer) error {
	if err := parse(e, args[1:]); err != nil {
		return err
	}
	if e.fs.NArg() != 1 {
		return fmt.Errorf("%w: keys revoke ID", ErrUsage)
	}
	store, err := openStore(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	if err := app.New(store, app.Config{}, nil).RevokeKey(ctx, e.fs.Arg(0)); err != nil {
		return fmt.Errorf("revoke %s: %w", e.fs.Arg(0), err)
	}
	fmt.Fprintln(stderr, "revoked", e.fs.Arg(0))
	return nil
}

// agentDefaults applies what --agent stands for: scopes send,read (admin is
// refused), exactly one mailbox ("default" unless --mailbox names one), and
// approval on unless --requires-approval=false is given explicitly.
func agentDefaults(e *envFlags, scopes *string, mailboxes *multiFlag, approval *bool) error {
	set := map[string]bool{}
	e.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["scopes"] {
		*scopes = "send,read"
	}
	sc, err := core.ParseScopes(*scopes)
	if err != nil {
		return fmt.Errorf("%w: --scopes: %v", ErrUsage, err)
	}
	if slices.Contains(sc, core.ScopeAdmin) {
		return fmt.Errorf("%w: an --agent key may not hold the admin scope", ErrUsage)
	}
	switch len(*mailboxes) {
	case 0:
		*mailboxes = multiFlag{core.DefaultMailboxID}
	case 1:
	default:
		return fmt.Errorf("%w: an --agent key is limited to one --mailbox", ErrUsage)
	}
	if !set["requires-approval"] {
		*approval = true
	}
	return nil
}
