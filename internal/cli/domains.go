package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

const domainsUsage = "domains add DOMAIN [--selector S] [--algorithm rsa2048|ed25519] [--receive] [--catch-all MAILBOX] [--mx-host HOST] | domains list | domains remove DOMAIN"

func runDomains(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := subcommandFlags("domains", args, domainsUsage, getenv, stderr)
	if err != nil {
		return err
	}
	var dsn, tenant string
	dbFlag(e, &dsn)
	e.fs.StringVar(&tenant, "tenant", "default", "tenant the domain belongs to")
	// Each subcommand defines its own flags on e and parses args[1:]; dsn
	// and tenant are read after that parse, hence the pointers.
	switch args[0] {
	case "add":
		return domainsAdd(ctx, e, &dsn, &tenant, args, getenv, stdout, stderr)
	case "list":
		return domainsList(ctx, e, &dsn, &tenant, args, getenv, stdout, stderr)
	case "remove":
		return domainsRemove(ctx, e, &dsn, &tenant, args, getenv, stdout, stderr)
	}
	return fmt.Errorf("%w: %s", ErrUsage, domainsUsage)
}

func domainsAdd(ctx context.Context, e *envFlags, dsn, tenant *string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var selector, algorithm string
	e.fs.StringVar(&selector, "selector", app.DefaultSelector, "DKIM selector: the key is published at SELECTOR._domainkey.DOMAIN")
	e.fs.StringVar(&algorithm, "algorithm", "rsa2048", "key algorithm: rsa2048 (verified everywhere) or ed25519")
	var receive bool
	var catchAll, mxHost string
	e.fs.BoolVar(&receive, "receive", false, "the domain receives mail at the inbound listener: its records include the MX (docs/receiving.md)")
	e.fs.StringVar(&catchAll, "catch-all", "", "mailbox that takes mail for the domain's addresses no mailbox holds (implies --receive)")
	e.fs.StringVar(&mxHost, "mx-host", getenv("SENDONCE_INBOUND_NAME"), "host the MX record names: the server's --inbound-name")
	pos, err := positional(e, args[1:], 1, "domains add DOMAIN [--selector S] [--algorithm rsa2048|ed25519]")
	if err != nil {
		return err
	}
	secret := getenv("SENDONCE_SECRET_KEY")
	if err := app.CheckSecretKey(secret); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	store, err := openStore(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	svc := app.New(store, app.Config{SecretKey: secret, InboundName: mxHost}, nil)
	// The key is generated before the transaction: a running server
	// shares SQLite's one writer with this command.
	d, err := svc.PrepareDomain(app.AddDomainParams{Tenant: *tenant, Domain: pos[0], Selector: selector, Algorithm: algorithm,
		Receive: receive, CatchAll: catchAll})
	if err != nil {
		return err
	}
	if err := store.InTx(ctx, func(tx core.Tx) error { return svc.AddDomain(ctx, tx, d) }); err != nil {
		return err
	}
	recs, err := app.DomainRecords(d)
	if err != nil {
		return err
	}
	if !app.KeyEncrypted(d) {
		fmt.Fprintln(stderr, "warning: SENDONCE_SECRET_KEY is not set, so the DKIM private key is stored unencrypted in the database.")
	}
	printRecords(stdout, d, recs)
	return nil
}

func domainsList(ctx context.Context, e *envFlags, dsn, tenant *string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if _, err := positional(e, args[1:], 0, "domains list [--tenant T]"); err != nil {
		return err
	}
	store, err := openStore(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	ds, err := store.ListDomains(ctx, *tenant)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tSELECTOR\tALGORITHM\tKEY\tCREATED")
	for _, d := range ds {
		enc := "plaintext"
		if app.KeyEncrypted(d) {
			enc = "encrypted"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Domain, d.Selector, d.Algorithm, enc, d.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func domainsRemove(ctx context.Context, e *envFlags, dsn, tenant *string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	pos, err := positional(e, args[1:], 1, "domains remove DOMAIN")
	if err != nil {
		return err
	}
	store, err := openStore(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	if err := app.New(store, app.Config{}, nil).RemoveDomain(ctx, *tenant, pos[0]); err != nil {
		return fmt.Errorf("remove %s: %w", pos[0], err)
	}
	fmt.Fprintln(stderr, "removed", pos[0], "(its mail is no longer signed; withdraw its DKIM record once no mail signed with it is in transit)")
	return nil
}

// printRecords prints what to publish, as zone-file lines with their notes.
func printRecords(w io.Writer, d *core.Domain, recs []app.PublishRecord) {
	fmt.Fprintf(w, "Added %s with DKIM selector %s (%s). Publish these DNS records:\n", d.Domain, d.Selector, d.Algorithm)
	titles := map[string]string{"dkim": "DKIM key (required)", "spf": "SPF (suggestion)", "dmarc": "DMARC (suggestion)"}
	for _, r := range recs {
		fmt.Fprintf(w, "\n%s\n  %s\n", titles[r.Purpose], r.ZoneLine())
		if r.Note != "" {
			fmt.Fprintf(w, "  Note: %s\n", r.Note)
		}
	}
	fmt.Fprintf(w, "\nThen check them with: sendonce dns check %s --selector %s\n", d.Domain, d.Selector)
}

func runDNS(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const dnsUsage = "dns check DOMAIN [--selector S] [--resolver HOST:PORT] [--public-url URL] [--bounce-domain D] [--tls-receivers LIST] [--json]"
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("%w: %s", ErrUsage, dnsUsage)
	}
	e := newFlags("dns check", getenv, stderr)
	var (
		dsn, tenant, selector, resolver string
		publicURL, bounce, receivers    string
		asJSON                          bool
	)
	dbFlag(e, &dsn)
	e.fs.StringVar(&tenant, "tenant", "default", "tenant whose stored key the published one must match")
	e.fs.StringVar(&selector, "selector", "", "DKIM selector (default: the stored domain's)")
	e.str(&resolver, "resolver", "SENDONCE_DNS_RESOLVER", "", "DNS server HOST:PORT to query (default: the first nameserver of /etc/resolv.conf)")
	// The bulk sender rules read serve's settings, from the same
	// variables, so that the check judges the deployment as it runs.
	e.str(&publicURL, "public-url", "SENDONCE_PUBLIC_URL", "", "the server's --public-url: the base of bulk mail's one-click unsubscribe links")
	e.str(&bounce, "bounce-domain", "SENDONCE_BOUNCE_DOMAIN", "", "the server's --bounce-domain: the envelope senders' domain, whose SPF and alignment are checked (default: the domain)")
	e.str(&receivers, "tls-receivers", "SENDONCE_TLS_RECEIVERS", dnscheck.DefaultReceivers, "receiver domains whose mail exchangers must offer STARTTLS with a valid certificate (\"none\": not checked)")
	e.fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	pos, err := positional(e, args[1:], 1, dnsUsage)
	if err != nil {
		return err
	}
	if _, err := app.ResolverAddr(resolver); err != nil {
		return fmt.Errorf("%w: --resolver: %v", ErrUsage, err)
	}
	rules := app.SenderRulesConfig{BounceDomain: bounce}
	if rules.TLSReceivers, err = dnscheck.ParseReceivers(receivers); err != nil {
		return fmt.Errorf("%w: --tls-receivers: %v", ErrUsage, err)
	}
	store, err := openExistingStore(ctx, dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	var rep *dnscheck.Report
	if store != nil {
		defer store.Close()
		cfg := app.Config{PublicURL: publicURL, SenderRules: rules}
		rep, err = app.New(store, cfg, nil).CheckDomain(ctx, app.DNSCheck{Tenant: tenant, Domain: pos[0], Selector: selector, Resolver: resolver})
	} else {
		// No database: nothing to compare the published key with.
		var addr string
		if addr, err = app.ResolverAddr(resolver); err == nil {
			rep, err = dnscheck.Check(ctx, dnscheck.Options{Domain: pos[0], Selector: selector, Resolver: addr, EnvelopeDomain: bounce,
				Bulk: &dnscheck.BulkRules{PublicURL: publicURL, Receivers: rules.TLSReceivers}})
		}
	}
	if err != nil {
		if core.ErrorCode(err) == core.CodeValidation {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprint(stdout, rep.Text())
	}
	if n := rep.Count(dnscheck.Error); n > 0 {
		return fmt.Errorf("dns check of %s found %d error(s)", rep.Domain, n)
	}
	return nil
}

// openExistingStore opens the database when it exists and returns nil when
// an SQLite file is absent, so that a command that can do without one does
// not create it.
func openExistingStore(ctx context.Context, dsn string) (*sqlstore.Store, error) {
	if strings.HasPrefix(dsn, "sqlite:") {
		path, err := sqlstore.ParseDSN(dsn)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	return openStore(ctx, dsn)
}
