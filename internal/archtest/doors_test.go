package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// doors are the adapters that take requests from outside and change the
// database: every change they make goes through a service (internal/app,
// internal/webhook), which owns the transaction or is handed the one of
// the write protocol (idempotency.Run).
var doors = []string{"../httpapi", "../httpapi/kit", "../httpapi/resend", "../httpapi/mailera", "../submission", "../dashboard", "../mxserver", "../imapsync"}

// TestDoors_ChangeOnlyThroughServices keeps the adapters honest. A store
// handed to an adapter let one door create keys without the rules the
// other applies; so no door holds the store, opens a transaction or calls
// a transaction's methods.
//
// The check is syntactic (go/parser, no type checking), so it has limits:
// it knows a transaction only as an identifier named tx or declared of
// type core.Tx in the same file (a value renamed through an assignment, or
// returned from a call, escapes it); it knows the store only by the names
// core.Store and core.Transactor and the call .Store(); and a call of
// .InTx is refused whatever its receiver, while passing a method value
// (InTx: s.svc.InTx, the protocol's transactor) is allowed.
func TestDoors_ChangeOnlyThroughServices(t *testing.T) {
	for _, dir := range doors {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			n++
			for _, f := range checkFile(t, path, nil) {
				t.Error(f)
			}
		}
		if n == 0 {
			t.Fatalf("%s: no Go files: the list of doors is out of date", dir)
		}
	}
}

// TestDoors_ProtocolCheckFindsEachBreach: a door allowed a protocol of
// its own (a transactor and listed transaction methods; none is today:
// the inbound listener and IMAP sync keep theirs in app) is still found
// holding the store, importing sqlstore or calling a method off its list.
func TestDoors_ProtocolCheckFindsEachBreach(t *testing.T) {
	src := `package door

import (
	"context"

	"github.com/sendonce/sendonce/internal/core"
	_ "github.com/sendonce/sendonce/internal/sqlstore"
)

type listener struct{ store core.Transactor; all core.Store }

func (l *listener) write(ctx context.Context) error {
	return l.store.InTx(ctx, func(tx core.Tx) error {
		if _, err := tx.SendForUpdate(ctx, "id"); err != nil {
			return err
		}
		return tx.InsertReceived(ctx, nil)
	})
}
`
	allow := &allowance{transactor: true, txMethods: map[string]bool{"SendForUpdate": false}}
	got := checkFileAllowing(t, "door.go", []byte(src), allow)
	for _, want := range []string{"imports", "core.Store", "tx.InsertReceived"} {
		if !slices.ContainsFunc(got, func(f string) bool { return strings.Contains(f, want) }) {
			t.Errorf("no finding mentions %q; findings:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if len(got) != 3 || !allow.txMethods["SendForUpdate"] {
		t.Errorf("%d findings, want 3 (and SendForUpdate seen: %v):\n%s", len(got), allow.txMethods["SendForUpdate"], strings.Join(got, "\n"))
	}
}

// TestDoors_CheckFindsEachBreach: the check is not vacuous; each thing it
// refuses, written once, is found.
func TestDoors_CheckFindsEachBreach(t *testing.T) {
	src := `package door

import (
	"context"

	c "github.com/sendonce/sendonce/internal/core"
	_ "github.com/sendonce/sendonce/internal/sqlstore"
)

type server struct{ store c.Store; svc interface{ Store() any } }

func (s *server) write(ctx context.Context, t c.Tx) error {
	_ = s.svc.Store()
	if err := t.InsertAudit(ctx, nil); err != nil {
		return err
	}
	return s.store.InTx(ctx, func(tx c.Tx) error { return tx.DeleteTemplate(ctx, "t", "id") })
}

func (s *server) fine(ctx context.Context, tx c.Tx, run func(c.Tx) error) error {
	_ = s.store.InTx // a method value: the protocol's transactor, passed on
	return run(tx)
}
`
	got := checkFile(t, "door.go", []byte(src))
	for _, want := range []string{"imports", "core.Store", ".Store()", "t.InsertAudit", ".InTx(", "tx.DeleteTemplate"} {
		if !slices.ContainsFunc(got, func(f string) bool { return strings.Contains(f, want) }) {
			t.Errorf("no finding mentions %q; findings:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if len(got) != 6 {
		t.Errorf("%d findings, want 6:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// checkFile parses one file (src, or the file at path when src is nil) and
// returns what breaks the rule, one line each.
func checkFile(t *testing.T, path string, src []byte) []string {
	t.Helper()
	return checkFileAllowing(t, path, src, &allowance{})
}

// allowance is what a protocol door may do that other doors may not:
// name core.Transactor and call .InTx (transactor), and call the
// transaction methods of txMethods, each marked true once seen.
type allowance struct {
	transactor bool
	txMethods  map[string]bool
}

// checkFileAllowing is checkFile with allow's exceptions.
func checkFileAllowing(t *testing.T, path string, src []byte, allow *allowance) []string {
	t.Helper()
	fset := token.NewFileSet()
	var s any
	if src != nil {
		s = src
	}
	f, err := parser.ParseFile(fset, path, s, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	report := func(n ast.Node, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), fmt.Sprintf(format, args...)))
	}
	core := "core"
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		switch {
		case strings.HasSuffix(p, "/internal/sqlstore"):
			report(imp, "imports %s: a door reads through a narrow interface and writes through a service", p)
		case strings.HasSuffix(p, "/internal/core") && imp.Name != nil:
			core = imp.Name.Name
		}
	}
	txs := txNames(f, core)
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && x.Name == core && (n.Sel.Name == "Store" || n.Sel.Name == "Transactor" && !allow.transactor) {
				report(n, "names core.%s: a door holds no store; declare the reads it needs", n.Sel.Name)
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch {
			case sel.Sel.Name == "Store" && len(n.Args) == 0:
				report(n, "calls .Store(): a door is given what it reads, not the store")
			case sel.Sel.Name == "InTx" && !allow.transactor:
				report(n, "calls .InTx(: a door opens no transaction; a service method does")
			}
			if x, ok := sel.X.(*ast.Ident); ok && txs[x.Name] && ast.IsExported(sel.Sel.Name) {
				if _, ok := allow.txMethods[sel.Sel.Name]; ok {
					allow.txMethods[sel.Sel.Name] = true
					return true
				}
				report(n, "calls %s.%s: a door passes the transaction to a service method and calls none of its own", x.Name, sel.Sel.Name)
			}
		}
		return true
	})
	return out
}

// txNames is the names a file gives transactions: tx, and every parameter,
// result, field or variable declared of type core.Tx.
func txNames(f *ast.File, core string) map[string]bool {
	names := map[string]bool{"tx": true}
	isTx := func(e ast.Expr) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && x.Name == core && sel.Sel.Name == "Tx"
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			if isTx(n.Type) {
				for _, id := range n.Names {
					names[id.Name] = true
				}
			}
		case *ast.ValueSpec:
			if n.Type != nil && isTx(n.Type) {
				for _, id := range n.Names {
					names[id.Name] = true
				}
			}
		}
		return true
	})
	return names
}
