package client

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// The client's error codes are the server's, read from its one table:
// every code the server can answer has a constant here, and every constant
// here is one the server answers (CodeHTTP, the client's own, aside).
func TestCodes_MatchTheServersTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{} // code → constant name
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			for i, name := range v.Names {
				lit, ok := v.Values[i].(*ast.BasicLit)
				if !ok || !strings.HasPrefix(name.Name, "Code") || name.Name == "CodeHTTP" {
					continue
				}
				code, _ := strconv.Unquote(lit.Value)
				ours[code] = name.Name
			}
		}
	}
	server := kit.ErrorStatuses()
	for code := range server {
		if _, ok := ours[code]; !ok {
			t.Errorf("the server answers %q (HTTP %d); the client has no constant for it", code, server[code])
		}
	}
	for code, name := range ours {
		if _, ok := server[code]; !ok {
			t.Errorf("client.%s = %q is not a code the server answers", name, code)
		}
	}
}
