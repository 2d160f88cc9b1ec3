package cli_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/cli"
	"github.com/sendonce/sendonce/internal/core"
)

// keys create --stream stores the key's default stream; a stream that is
// neither transactional nor bulk is a usage error.
func TestKeysCreate_StreamIsStored(t *testing.T) {
	db := sqliteDSN(t)
	run := func(args ...string) error {
		return runCLI(t, nil, append([]string{"keys", "create", "--scopes", "send", "--db", db}, args...)...).err
	}
	if err := run("--name", "news", "--stream", "bulk"); err != nil {
		t.Fatalf("keys create --stream bulk: %v", err)
	}
	if err := run("--name", "odd", "--stream", "urgent"); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("keys create --stream urgent: %v, want a usage error", err)
	}
	store := openDB(t, db)
	keys, err := store.ListAPIKeys(context.Background())
	if err != nil || len(keys) != 1 || keys[0].DefaultStream != core.StreamBulk {
		t.Fatalf("keys: %v %+v", err, keys)
	}
}

// serve refuses egress pools, stream pools and warm-ups that name what
// does not exist, before anything starts.
func TestServe_RejectsBadEgressPools(t *testing.T) {
	db := sqliteDSN(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--egress-pool", "bulk=nope"}, "--egress-pool"},
		{[]string{"--egress-pool", "bulk=a:0"}, "--egress-pool"},
		{[]string{"--stream-pool", "bulk=nope"}, "--stream-pool"},
		{[]string{"--stream-pool", "urgent=p", "--egress-pool", "p=a"}, "--stream-pool"},
		{[]string{"--egress-warmup", "nope=2026-12-01"}, "--egress-warmup"},
		{[]string{"--egress-warmup", "a=yesterday"}, "--egress-warmup"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--transport", "mx", "--egress-source", "a=127.0.0.5"}, c.args...)
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // should it start after all, it stops at once
		err := cli.Run(ctx, args, func(string) string { return "" }, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve %v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
}
