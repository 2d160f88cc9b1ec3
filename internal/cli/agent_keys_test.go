package cli_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/cli"
	"github.com/sendonce/sendonce/internal/core"
)

func TestKeysCreate_AgentShorthand(t *testing.T) {
	db := sqliteDSN(t)
	run := func(args ...string) (string, error) {
		r := runCLI(t, nil, append(append([]string{"keys", "create"}, args...), "--db", db)...)
		return r.stdout, r.err
	}
	secret, err := run("--name", "bot", "--agent", "--allow-recipient", "Example.com", "--allow-recipient", "boss@partner.test",
		"--max-per-hour", "5", "--max-per-day", "20")
	if err != nil || !strings.HasPrefix(secret, "so_") {
		t.Fatalf("keys create --agent: %v %q", err, secret)
	}
	for _, bad := range [][]string{
		{"--name", "x", "--agent", "--scopes", "send,admin"},
		{"--name", "x", "--agent", "--mailbox", "a", "--mailbox", "b"},
	} {
		if _, err := run(bad...); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: err %v, want a usage error", bad, err)
		}
	}
	store := openDB(t, db)
	keys, err := store.ListAPIKeys(context.Background())
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %v %d", err, len(keys))
	}
	k := keys[0]
	if !k.Agent || !k.RequiresApproval || !slices.Equal(k.Scopes, []core.Scope{core.ScopeSend, core.ScopeRead}) ||
		!slices.Equal(k.Mailboxes, []string{"default"}) || !slices.Equal(k.AllowRecipients, []string{"example.com", "boss@partner.test"}) ||
		k.MaxPerHour != 5 || k.MaxPerDay != 20 {
		t.Errorf("agent key: %+v", k)
	}
}
