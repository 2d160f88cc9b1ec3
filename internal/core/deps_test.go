package core_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestCore_StandardLibraryOnly: the domain depends on the standard library
// alone (docs/architecture.md). Module packages it imports — only the
// public leaf idempotency/idemtype today — must themselves import nothing
// else.
func TestCore_StandardLibraryOnly(t *testing.T) {
	const module = "github.com/sendonce/sendonce/"
	seen := map[string]bool{}
	var walk func(path string)
	walk = func(path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		pkg, err := build.Import(path, ".", 0)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			switch {
			case strings.HasPrefix(imp, module):
				walk(imp)
			case strings.Contains(strings.Split(imp, "/")[0], "."):
				t.Errorf("%s imports %s: core and what it imports use the standard library only", path, imp)
			}
		}
	}
	walk(module + "internal/core")
	if len(seen) < 2 {
		t.Fatalf("walked %v; want internal/core and idempotency/idemtype", seen)
	}
}
