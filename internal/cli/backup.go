package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// pgBackupAdvice is what backup says on a PostgreSQL database, whose
// copies are PostgreSQL's own tools' business.
const pgBackupAdvice = `sendonce backup copies SQLite databases only. Back up PostgreSQL with its own tools:
  pg_dump --format=custom --file=sendonce.dump 'postgres://…'   (restore with pg_restore)
or continuous archiving with point-in-time recovery (PITR).
See docs/operations.md, "Backup, restore and upgrade".
`

// runBackup copies the SQLite database to --to while servers keep using
// it (sqlstore.BackupSQLite), and prints what it wrote.
func runBackup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("backup", getenv, stderr)
	var dsn, to string
	var force bool
	dbFlag(e, &dsn)
	e.fs.StringVar(&to, "to", "", "the file to write the copy to (required; must not exist)")
	e.fs.BoolVar(&force, "force", false, "replace --to if it exists")
	if err := parse(e, args); err != nil {
		return err
	}
	if len(e.fs.Args()) > 0 {
		return fmt.Errorf("%w: backup takes no arguments, only flags (--to FILE)", ErrUsage)
	}
	if to == "" {
		return fmt.Errorf("%w: backup needs --to FILE", ErrUsage)
	}
	if server.IsPostgres(dsn) {
		fmt.Fprint(stderr, pgBackupAdvice)
		return fmt.Errorf("%w: backup of a PostgreSQL database: use pg_dump or PITR", ErrUsage)
	}
	path, err := sqlstore.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	b, err := sqlstore.BackupSQLite(ctx, path, to, force)
	if errors.Is(err, sqlstore.ErrBackupExists) {
		return fmt.Errorf("%w (remove it, choose another --to, or pass --force)", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d bytes, integrity_check %s\n", b.Path, b.Bytes, b.Integrity)
	return nil
}
