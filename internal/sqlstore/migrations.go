package sqlstore

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

// A migration whose text is the same in both dialects lives once, in
// migrations/shared; the rest live in each dialect's own folder. A
// migration's version is its file's name whichever folder holds it, so
// moving a file between folders changes nothing a database has recorded
// (sendonce_migrations keeps names, not paths or contents).
//
//go:embed migrations/shared/*.sql migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// migrationFile is one migration of a dialect: its version (the file's
// name, which is what sendonce_migrations records) and where it is.
type migrationFile struct {
	version string
	path    string
}

// migrationsOf lists the migrations of dialect d in the order they apply
// (by version). A version in both the shared folder and d's own would
// make which text applies depend on the folder, so it is an error.
func migrationsOf(d Dialect) ([]migrationFile, error) {
	own := "migrations/sqlite"
	if d == Postgres {
		own = "migrations/postgres"
	}
	var out []migrationFile
	seen := map[string]string{}
	for _, dir := range []string{"migrations/shared", own} {
		files, err := fs.Glob(migrationFiles, dir+"/*.sql")
		if err != nil {
			return nil, fmt.Errorf("list migrations: %w", err)
		}
		for _, f := range files {
			v := path.Base(f)
			if other, dup := seen[v]; dup {
				return nil, fmt.Errorf("migration %s is in both %s and %s", v, other, dir)
			}
			seen[v] = dir
			out = append(out, migrationFile{version: v, path: f})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// migrationVersions is migrationsOf's versions alone.
func migrationVersions(d Dialect) ([]string, error) {
	files, err := migrationsOf(d)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.version
	}
	return names, nil
}
