package cli_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/internal/cli"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestSuppressionsCommands: add (twice: the second says so), list with
// its filters, remove, and a second remove that finds nothing.
func TestSuppressionsCommands(t *testing.T) {
	srv := sendoncetest.Start(t, sendoncetest.Options{})
	env := map[string]string{"SENDONCE_API_URL": srv.URL, "SENDONCE_API_KEY": srv.AdminKey}

	if r := runCLI(t, env, "suppressions", "add", "Ada@Example.com", "--reason", "asked us to stop"); r.err != nil || r.stdout != "ada@example.com suppressed\n" {
		t.Fatalf("add: %v %q", r.err, r.stdout)
	}
	if r := runCLI(t, env, "suppressions", "add", "ada@example.com"); r.err != nil || !strings.Contains(r.stdout, "suppressed already (manual, asked us to stop)") {
		t.Fatalf("add again: %v %q", r.err, r.stdout)
	}
	if r := runCLI(t, env, "suppressions", "add", "bob@example.com"); r.err != nil {
		t.Fatal(r.err)
	}
	r := runCLI(t, env, "suppressions", "list")
	if r.err != nil || !strings.Contains(r.stdout, "ada@example.com  manual") || !strings.Contains(r.stdout, "bob@example.com") {
		t.Fatalf("list: %v\n%s", r.err, r.stdout)
	}
	r = runCLI(t, env, "suppressions", "list", "--email", "ADA@example.com", "--json")
	var l client.SuppressionList
	if err := json.Unmarshal([]byte(r.stdout), &l); r.err != nil || err != nil || len(l.Data) != 1 || l.Data[0].Email != "ada@example.com" {
		t.Fatalf("list --email: %v %v\n%s", r.err, err, r.stdout)
	}
	if r := runCLI(t, env, "suppressions", "list", "--limit", "1"); r.err != nil || !strings.Contains(r.stdout, "more: --after sup_") {
		t.Fatalf("list --limit 1: %v\n%s", r.err, r.stdout)
	}
	if r := runCLI(t, env, "suppressions", "remove", "ada@example.com"); r.err != nil {
		t.Fatal(r.err)
	}
	if r := runCLI(t, env, "suppressions", "remove", "ada@example.com"); !client.IsNotFound(r.err) {
		t.Fatalf("remove again: %v, want not found", r.err)
	}
	if r := runCLI(t, env, "suppressions", "add", "not an address"); client.ErrorCode(r.err) != "validation_error" {
		t.Fatalf("add a non-address: %v, want validation_error", r.err)
	}
	for _, args := range [][]string{{"suppressions"}, {"suppressions", "add"}, {"suppressions", "list", "x"}, {"suppressions", "frob"}} {
		if r := runCLI(t, env, args...); !errors.Is(r.err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, r.err)
		}
	}
}
