package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/metrics"
)

// apiDocPath is the HTTP reference, relative to this package.
const apiDocPath = "../../docs/api.md"

// routeHeading is the one form a route takes in docs/api.md:
// ### `METHOD /path`
var routeHeading = regexp.MustCompile("^### `([A-Z]+) (/[^` ]*)`$")

// apiDoc reads docs/api.md.
func apiDoc(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatalf("read the API reference: %v", err)
	}
	return b
}

// docRoutes returns the routes docs/api.md gives a heading, in order.
func docRoutes(doc []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		if m := routeHeading.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			out = append(out, m[1]+" "+m[2])
		}
	}
	return out
}

// servedRoutes returns the patterns routes() registers, less the
// method-less catch-all.
func servedRoutes() []string {
	m := metrics.New(func(context.Context) (int, error) { return 0, nil })
	var out []string
	for _, p := range (&Server{mux: http.NewServeMux(), Base: &kit.Base{Metrics: m}}).routes() {
		if strings.Contains(p, " ") {
			out = append(out, p)
		}
	}
	return out
}

// openAPIRoutes returns the operations openapi.json documents.
func openAPIRoutes(t *testing.T) []string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	var out []string
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	return out
}

// TestAPIDoc_DocumentsEveryRoute fails when a served route has no heading
// in docs/api.md, when a heading names a route nobody serves, or when
// openapi.json's operations are not the documented ones.
func TestAPIDoc_DocumentsEveryRoute(t *testing.T) {
	documented := docRoutes(apiDoc(t))
	if len(documented) == 0 {
		t.Fatalf("%s has no route headings of the form ### `METHOD /path`", apiDocPath)
	}
	seen := map[string]bool{}
	for _, r := range documented {
		if seen[r] {
			t.Errorf("%s gives %q two headings", apiDocPath, r)
		}
		seen[r] = true
	}
	served := servedRoutes()
	for _, r := range served {
		if !seen[r] {
			t.Errorf("route %q is served but has no heading ### `%s` in %s", r, r, apiDocPath)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("%s documents %q, which no route serves", apiDocPath, r)
		}
	}
	for _, r := range openAPIRoutes(t) {
		if !seen[r] {
			t.Errorf("openapi.json documents %q, which %s does not", r, apiDocPath)
		}
	}
}

// TestAPIDoc_ErrorTableHasEveryCode fails when an error code the server
// can answer (a key of errorStatus, the one code-to-status table, which
// must hold every Code… constant of internal/core) is missing from the
// error table of docs/api.md, when the table names a code that does not
// exist, or when its status is not the one the server answers with.
func TestAPIDoc_ErrorTableHasEveryCode(t *testing.T) {
	for _, c := range stringConsts(t, "../core/error.go", "Code") {
		if _, ok := kit.ErrorStatus[c]; !ok {
			t.Errorf("core's error code %q has no status in errorStatus", c)
		}
	}
	codes := slices.Collect(maps.Keys(kit.ErrorStatus))
	table := errorTable(t, apiDoc(t))
	for _, c := range codes {
		status, ok := table[c]
		if !ok {
			t.Errorf("error code %q is missing from the error table of %s", c, apiDocPath)
			continue
		}
		if want := kit.StatusOf(c); status != want {
			t.Errorf("%s gives %q status %d; the server answers %d", apiDocPath, c, status, want)
		}
	}
	for c := range table {
		if !slices.Contains(codes, c) {
			t.Errorf("%s lists error code %q, which the server does not have", apiDocPath, c)
		}
	}
}

// errorTableRow is a row of the error table: | `code` | status | when |.
var errorTableRow = regexp.MustCompile("^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|")

// errorTable returns code → status from the rows of the "## Errors"
// section of doc.
func errorTable(t *testing.T, doc []byte) map[string]int {
	t.Helper()
	out := map[string]int{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Errors"
			continue
		}
		if !in {
			continue
		}
		if m := errorTableRow.FindStringSubmatch(line); m != nil {
			if _, dup := out[m[1]]; dup {
				t.Errorf("%s lists error code %q twice", apiDocPath, m[1])
			}
			out[m[1]], _ = strconv.Atoi(m[2])
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no error table under \"## Errors\"", apiDocPath)
	}
	return out
}

// stringConsts returns the values of the string constants in file whose
// names start with prefix, sorted.
func stringConsts(t *testing.T, file, prefix string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, prefix) || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("%s: %s: %v", file, name.Name, err)
				}
				out = append(out, v)
			}
		}
	}
	sort.Strings(out)
	return out
}
