package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"
)

// ErrBackupExists is returned when a backup's target file already exists
// and overwriting was not asked for.
var ErrBackupExists = errors.New("backup target exists")

// Backup is what BackupSQLite wrote.
type Backup struct {
	// Path is the copy's path, as given.
	Path string
	// Bytes is the copy's size.
	Bytes int64
	// Integrity is the copy's PRAGMA integrity_check answer: "ok".
	Integrity string
}

// BackupSQLite writes a consistent copy of the SQLite database at src to
// dst while other processes keep writing to it. It never creates src and
// never migrates it: it reads.
//
// The copy is SQLite's VACUUM INTO, which reads the database in one read
// transaction: every transaction committed before it began is in the
// copy, none that committed after, and a WAL-mode writer is not held up
// (it only cannot checkpoint past the copy's snapshot until it ends). A
// copy of the file alone would miss what is still in the -wal file.
//
// The copy is written under a temporary name in dst's directory, synced,
// checked with PRAGMA integrity_check, and only then given its name, so a
// file at dst is always a whole database. An existing dst is refused
// (ErrBackupExists) unless overwrite is set.
func BackupSQLite(ctx context.Context, src, dst string, overwrite bool) (Backup, error) {
	if st, err := os.Stat(src); err != nil {
		return Backup{}, fmt.Errorf("backup source: %w", err)
	} else if !st.Mode().IsRegular() {
		return Backup{}, fmt.Errorf("backup source %s: not a regular file", src)
	}
	if dt, err := os.Stat(dst); err == nil {
		if st, err := os.Stat(src); err == nil && os.SameFile(st, dt) {
			return Backup{}, fmt.Errorf("backup target %s is the database itself", dst)
		}
		if !overwrite {
			return Backup{}, fmt.Errorf("%w: %s", ErrBackupExists, dst)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Backup{}, fmt.Errorf("backup target: %w", err)
	}
	dir := filepath.Dir(dst)
	// VACUUM INTO writes into a file that does not exist or is empty: an
	// empty temporary file reserves a unique name.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return Backup{}, fmt.Errorf("backup temporary file: %w", err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	defer removeSQLiteFiles(tmpPath) // a no-op once renamed away

	if err := vacuumInto(ctx, src, tmpPath); err != nil {
		return Backup{}, err
	}
	if err := syncFile(tmpPath); err != nil {
		return Backup{}, err
	}
	integrity, err := integrityCheck(ctx, tmpPath)
	if err != nil {
		return Backup{}, err
	}
	if err := place(tmpPath, dst, overwrite); err != nil {
		return Backup{}, err
	}
	if err := syncDir(dir); err != nil {
		return Backup{}, err
	}
	st, err := os.Stat(dst)
	if err != nil {
		return Backup{}, fmt.Errorf("backup written: %w", err)
	}
	return Backup{Path: dst, Bytes: st.Size(), Integrity: integrity}, nil
}

// openSQLiteReadOnly opens path read-only (mode=ro): it is never created,
// and no statement on it can write. A WAL database is read with its -wal
// file, as a writer sees it.
func openSQLiteReadOnly(path string) *sql.DB {
	u := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_pragma=busy_timeout(10000)"
	db := sql.OpenDB(stmtConnector{d: &sqlite.Driver{}, dsn: u})
	db.SetMaxOpenConns(1)
	return db
}

func vacuumInto(ctx context.Context, src, tmpPath string) error {
	db := openSQLiteReadOnly(src)
	defer db.Close()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", tmpPath); err != nil {
		return fmt.Errorf("backup: VACUUM INTO: %w", err)
	}
	return nil
}

// integrityCheck runs PRAGMA integrity_check on the copy: "ok", or an
// error naming the first problems it found.
func integrityCheck(ctx context.Context, path string) (string, error) {
	db := openSQLiteReadOnly(path)
	defer db.Close()
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return "", fmt.Errorf("backup: integrity check: %w", err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", fmt.Errorf("backup: integrity check: %w", err)
		}
		found = append(found, line)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("backup: integrity check: %w", err)
	}
	if len(found) != 1 || found[0] != "ok" {
		return "", fmt.Errorf("backup: the copy fails integrity_check: %s", strings.Join(found, "; "))
	}
	return found[0], nil
}

// place gives the finished copy its name. Without overwrite it links
// rather than renames: a link fails when dst exists, even when it
// appeared after the first check.
func place(tmpPath, dst string, overwrite bool) error {
	if overwrite {
		if err := os.Rename(tmpPath, dst); err != nil {
			return fmt.Errorf("backup: rename into place: %w", err)
		}
		return nil
	}
	if err := os.Link(tmpPath, dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrBackupExists, dst)
		}
		return fmt.Errorf("backup: link into place: %w", err)
	}
	return os.Remove(tmpPath)
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("backup: open copy to sync: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("backup: sync copy: %w", err)
	}
	return f.Close()
}

// syncDir makes the copy's new name durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("backup: open directory to sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("backup: sync directory: %w", err)
	}
	return nil
}

// removeSQLiteFiles removes a database file and what SQLite may have left
// beside it.
func removeSQLiteFiles(path string) {
	for _, p := range []string{path, path + "-journal", path + "-wal", path + "-shm"} {
		_ = os.Remove(p)
	}
}
