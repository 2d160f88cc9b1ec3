package main_test

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
)

func authGet(t *testing.T, url, secret string) int {
	t.Helper()
	status, _ := apiCall(t, "GET", url, secret, "", "")
	return status
}

// TestKeys_CreateListRevokeWhileServing: a key created while the server runs
// works at once, keys list never shows a secret, and revoke takes effect at
// once.
func TestKeys_CreateListRevokeWhileServing(t *testing.T) {
	binaryTest(t)
	db := sqliteDB(t)
	p := startServe(t, "--db", db)
	secret := createKey(t, db, "late", "read")
	if strings.Count(secret, "\n") != 0 || !strings.HasPrefix(secret, "so_") {
		t.Fatalf("keys create printed %q; want the secret alone", secret)
	}
	if code := authGet(t, p.url+"/v1/sends", secret); code != http.StatusOK {
		t.Fatalf("new key: %d, want 200", code)
	}
	list := run(t, binPath, "keys", "list", "--db", db)
	id := strings.Split(strings.TrimPrefix(secret, "so_"), "_")[0]
	if !strings.Contains(list, id) || !strings.Contains(list, "late") {
		t.Fatalf("keys list lacks the key:\n%s", list)
	}
	if strings.Contains(list, secret) || strings.Contains(list, strings.Split(secret, "_")[2]) {
		t.Fatalf("keys list shows the secret:\n%s", list)
	}
	run(t, binPath, "keys", "revoke", "--db", db, id)
	// The server had the key cached: revocation by another process takes
	// effect within app.KeyCacheTTL (a second).
	time.Sleep(app.KeyCacheTTL + 100*time.Millisecond)
	if code := authGet(t, p.url+"/v1/sends", secret); code != http.StatusUnauthorized {
		t.Fatalf("revoked key after %s: %d, want 401", app.KeyCacheTTL, code)
	}
	if strings.Contains(p.logText(), secret) {
		t.Fatal("the server log contains an API key secret")
	}
}

func TestCLI_HelpVersionAndUsageErrors(t *testing.T) {
	if out := run(t, binPath, "help"); !strings.Contains(out, "sendonce serve") || !strings.Contains(out, "keys create") {
		t.Errorf("help does not list the commands:\n%s", out)
	}
	if out := run(t, binPath, "version"); !strings.HasPrefix(out, "sendonce ") {
		t.Errorf("version printed %q", out)
	}
	for _, args := range [][]string{{"frobnicate"}, {"keys", "create", "--name", "x", "--scopes", "root"}, {"serve", "--role", "boss"}, {"serve", "--transport", "ftp://x"}} {
		err := exec.Command(binPath, args...).Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("sendonce %v: %v, want exit code 2", args, err)
		}
	}
}
