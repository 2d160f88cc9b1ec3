package cli_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/cli"
	"github.com/sendonce/sendonce/internal/server"
)

// keys create --rate-limit stores the key's own limit (-1: none).
func TestKeysCreate_RateLimitIsStored(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "s.db")
	for _, n := range []string{"7", "-1"} {
		var out, errb bytes.Buffer
		if err := cli.Run(context.Background(), []string{"keys", "create", "--name", "k" + n, "--scopes", "send", "--rate-limit", n, "--db", db},
			func(string) string { return "" }, &out, &errb); err != nil {
			t.Fatalf("keys create --rate-limit %s: %v %s", n, err, errb.String())
		}
	}
	store, err := server.OpenStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	keys, err := store.ListAPIKeys(context.Background())
	if err != nil || len(keys) != 2 || keys[0].RateLimit != 7 || keys[1].RateLimit != -1 {
		t.Fatalf("keys: %v %+v", err, keys)
	}
}

// Bad limit settings, as flags or environment, are refused before
// anything starts.
func TestServe_RejectsBadLimits(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "s.db")
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
		var out, errb bytes.Buffer
		getenv := func(k string) string { return c.env[k] }
		err := cli.Run(context.Background(), append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, c.args...), getenv, &out, &errb)
		switch {
		case c.env == nil && !errors.Is(err, cli.ErrUsage):
			t.Errorf("serve %v: err %v, want a usage error", c.args, err)
		case c.env != nil && (err == nil || !strings.Contains(err.Error(), "SENDONCE_")):
			t.Errorf("serve with env %v: err %v, want one naming the variable", c.env, err)
		}
	}
}
