package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sendonce/sendonce/internal/server"
)

// runMigrate applies the pending migrations (what serve does when it
// starts), or with --status lists them and applies none.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("migrate", getenv, stderr)
	var dsn string
	var status bool
	dbFlag(e, &dsn)
	e.fs.BoolVar(&status, "status", false, "list applied and pending migrations; apply none")
	if err := parse(e, args); err != nil {
		return err
	}
	if len(e.fs.Args()) > 0 {
		return fmt.Errorf("%w: migrate takes no arguments, only flags (--status, --db)", ErrUsage)
	}
	before, err := server.MigrationStatus(ctx, dsn)
	if err != nil {
		return fmt.Errorf("migration status: %w", err)
	}
	if status {
		printMigrations(stdout, before)
		return nil
	}
	store, err := openStore(ctx, dsn)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	store.Close()
	after, err := server.MigrationStatus(ctx, dsn)
	if err != nil {
		return fmt.Errorf("migration status: %w", err)
	}
	had := map[string]bool{}
	for _, m := range before {
		had[m.Schema+" "+m.Name] = m.Applied
	}
	applied := 0
	for _, m := range after {
		if m.Applied && !had[m.Schema+" "+m.Name] {
			fmt.Fprintf(stdout, "applied %s %s\n", m.Schema, m.Name)
			applied++
		}
	}
	fmt.Fprintf(stdout, "applied %d now; %s\n", applied, migrationTally(after))
	return nil
}

// printMigrations writes one row per migration, in the order they apply,
// and a last line counting them.
func printMigrations(w io.Writer, ms []server.SchemaMigration) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEMA\tMIGRATION\tSTATUS\tAPPLIED AT")
	for _, m := range ms {
		st, at := "pending", "-"
		if m.Applied {
			st = "applied"
		}
		if m.Unknown {
			st = "applied, unknown to this binary"
		}
		if !m.AppliedAt.IsZero() {
			at = m.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Schema, m.Name, st, at)
	}
	tw.Flush()
	fmt.Fprintln(w, migrationTally(ms))
}

// migrationTally is "N applied, M pending" (and the unknown ones): the
// line scripts read, since --status exits 0 whatever is pending.
func migrationTally(ms []server.SchemaMigration) string {
	applied, pending, unknown := 0, 0, 0
	for _, m := range ms {
		switch {
		case m.Unknown:
			unknown++
		case m.Applied:
			applied++
		default:
			pending++
		}
	}
	s := fmt.Sprintf("%d applied, %d pending", applied, pending)
	if unknown > 0 {
		s += fmt.Sprintf(", %d unknown to this binary (a newer version applied them)", unknown)
	}
	return s
}
