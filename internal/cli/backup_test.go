package cli_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/cli"
)

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestBackup_RefusesToOverwrite: backup never writes over an existing
// file (nor leaves its temporary file behind) unless --force, never over
// the database itself, and never creates a database that is not there.
func TestBackup_RefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "db", "s.db")
	db := "sqlite:" + src
	if r := runCLI(t, nil, "migrate", "--db", db); r.err != nil {
		t.Fatalf("migrate: %v\n%s", r.err, r.stderr)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(out, "copy.db")
	if err := os.WriteFile(to, []byte("an older backup"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, nil, "backup", "--db", db, "--to", to)
	if r.err == nil || !strings.Contains(r.err.Error(), "--force") {
		t.Fatalf("backup onto an existing file: %v; want a refusal naming --force", r.err)
	}
	if b, _ := os.ReadFile(to); string(b) != "an older backup" {
		t.Fatalf("the existing file was changed: %q", b)
	}
	if names := dirNames(t, out); !slices.Equal(names, []string{"copy.db"}) {
		t.Fatalf("refused backup left %v", names)
	}

	r = runCLI(t, nil, "backup", "--db", db, "--to", to, "--force")
	if r.err != nil || !strings.Contains(r.stdout, "integrity_check ok") {
		t.Fatalf("backup --force: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	if r := runCLI(t, nil, "migrate", "--status", "--db", "sqlite:"+to); r.err != nil || !strings.Contains(r.stdout, " 0 pending") {
		t.Fatalf("the forced copy is not the migrated database: %v\n%s", r.err, r.stdout)
	}
	if names := dirNames(t, out); !slices.Equal(names, []string{"copy.db"}) {
		t.Fatalf("backup left %v beside the copy", names)
	}

	if r := runCLI(t, nil, "backup", "--db", db, "--to", src, "--force"); r.err == nil {
		t.Fatal("backup onto the database itself succeeded")
	}
	absent := filepath.Join(dir, "none.db")
	if r := runCLI(t, nil, "backup", "--db", "sqlite:"+absent, "--to", filepath.Join(out, "x.db")); r.err == nil {
		t.Fatal("backup of an absent database succeeded")
	}
	if _, err := os.Stat(absent); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup created the absent database (%v)", err)
	}
	if r := runCLI(t, nil, "backup", "--db", db); !errors.Is(r.err, cli.ErrUsage) {
		t.Fatalf("backup without --to: %v, want a usage error", r.err)
	}
}
