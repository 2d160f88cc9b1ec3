package sqlstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// A migration a database has recorded is never applied again, so its text
// must never change: a changed file would leave databases created before
// and after the change with different schemas under one version. Each
// dialect's list, shared folder included, is pinned here by the first 16
// hex digits of each file's SHA-256; a new migration adds a line.
func TestMigrations_AppliedTextNeverChanges(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		files, err := migrationsOf(d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		var got []string
		for _, f := range files {
			body, err := migrationFiles.ReadFile(f.path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(body)
			got = append(got, f.version+" "+hex.EncodeToString(sum[:])[:16])
		}
		want := strings.Fields(pinnedMigrations[d])
		var pairs []string
		for i := 0; i+1 < len(want); i += 2 {
			pairs = append(pairs, want[i]+" "+want[i+1])
		}
		if strings.Join(got, "\n") != strings.Join(pairs, "\n") {
			t.Errorf("%s migrations changed:\n got:\n%s\nwant:\n%s", d, strings.Join(got, "\n"), strings.Join(pairs, "\n"))
		}
	}
}

// One version in both the shared folder and a dialect's would make the
// text that applies depend on the folder; migrationsOf refuses it.
func TestMigrations_NoVersionInTwoFolders(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		files, err := migrationsOf(d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		for i := 1; i < len(files); i++ {
			if files[i-1].version >= files[i].version {
				t.Errorf("%s: %s then %s: not in strict version order", d, files[i-1].version, files[i].version)
			}
		}
	}
}
