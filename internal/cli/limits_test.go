package cli_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/cli"
)

// keys create --rate-limit stores the key's own limit (-1: none).
func TestKeysCreate_RateLimitIsStored(t *testing.T) {
	db := sqliteDSN(t)
	for _, n := range []string{"7", "-1"} {
		if r := runCLI(t, nil, "keys", "create", "--name", "k"+n, "--scopes", "send", "--rate-limit", n, "--db", db); r.err != nil {
			t.Fatalf("keys create --rate-limit %s: %v %s", n, r.err, r.stderr)
		}
	}
	store := openDB(t, db)
	keys, err := store.ListAPIKeys(context.Background())
	if err != nil || len(keys) != 2 || keys[0].RateLimit != 7 || keys[1].RateLimit != -1 {
		t.Fatalf("keys: %v %+v", err, keys)
	}
}

// Bad limit settings, as flags or environment, are refused before
// anything starts.
func TestServe_RejectsBadLimits(t *testing.T) {
	db := sqliteDSN(t)
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{args: []string{"--rate-limit", "-1"}},
		{args: []string{"--rate-limit-window", "0s"}},
		{args: []string{"--max-templates", "-3"}},
		{env: map[string]string{"SENDONCE_RATE_LIMIT": "lots"}},
		{env: map[string]string{"SENDONCE_MAX_API_KEYS": "x"}},
	} {
		err := runCLI(t, c.env, append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, c.args...)...).err
		switch {
		case c.env == nil && !errors.Is(err, cli.ErrUsage):
			t.Errorf("serve %v: err %v, want a usage error", c.args, err)
		case c.env != nil && (err == nil || !strings.Contains(err.Error(), "SENDONCE_")):
			t.Errorf("serve with env %v: err %v, want one naming the variable", c.env, err)
		}
	}
}
