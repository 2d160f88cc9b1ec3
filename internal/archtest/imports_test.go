package archtest

import (
	"bufio"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sendonce/sendonce"

// TestArchitecture_ImportTableIsTrue holds docs/architecture.md's import
// table to the code: each package's row names exactly the packages of
// this module its non-test files import, and every package of the module
// (but the test kits, this one and examples) has a row.
func TestArchitecture_ImportTableIsTrue(t *testing.T) {
	rows := importTable(t, "../../docs/architecture.md")
	actual := moduleImports(t, "../..")
	for pkg, imports := range actual {
		want, ok := rows[pkg]
		if !ok {
			t.Errorf("docs/architecture.md's import table has no row for %s (it imports %v)", pkg, imports)
			continue
		}
		if !slices.Equal(want, imports) {
			t.Errorf("docs/architecture.md says %s imports %v; it imports %v", pkg, want, imports)
		}
	}
	for pkg := range rows {
		if _, ok := actual[pkg]; !ok {
			t.Errorf("docs/architecture.md's import table has a row for %s, which is not a package", pkg)
		}
	}
}

var backticked = regexp.MustCompile("`([^`]+)`")

// importTable reads the table whose header is "| package | imports |":
// each row's packages (first cell) and their imports (second cell, the
// backticked names before any parenthesis; "none" for none), sorted.
func importTable(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "| package | imports |":
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
			continue
		case strings.HasPrefix(line, "|---"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 2 {
			t.Fatalf("import table row %q: want two cells", line)
		}
		imports := []string{}
		cell, _, _ := strings.Cut(cells[1], "(")
		for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
			imports = append(imports, m[1])
		}
		slices.Sort(imports)
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			rows[m[1]] = imports
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no import table", path)
	}
	return rows
}

// moduleImports maps each package of the module under root (by its short
// name: its path without the module and "internal/") to the module's
// packages its non-test files import, sorted.
func moduleImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "node_modules" ||
				rel == "examples" || rel == "bench" || rel == "deploy" || rel == "internal/testkit" || rel == "internal/archtest") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := shortName(filepath.ToSlash(filepath.Dir(rel)))
		set := out[pkg]
		if set == nil {
			set = []string{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, module+"/"); ok {
				if name := shortName(rest); !slices.Contains(set, name) {
					set = append(set, name)
				}
			}
		}
		out[pkg] = set
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

func shortName(rel string) string { return strings.TrimPrefix(rel, "internal/") }
