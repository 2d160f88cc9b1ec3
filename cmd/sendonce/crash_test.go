package main_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestCrash_SIGKILLWhileClientsRetry kills the real server with SIGKILL while
// clients retry their keys, restarts it on the same database, and proves
// that every key has exactly one send and the relay saw no Message-ID twice.
func TestCrash_SIGKILLWhileClientsRetry(t *testing.T) {
	binaryTest(t)
	smtpd := smtptest.Start(t, smtptest.Options{})
	smtpd.SetBehaviour(smtptest.Behaviour{DelayData: 30 * time.Millisecond}) // keeps attempts in flight when the kill lands
	db := sqliteDB(t)
	secret := createKey(t, db, "crash", "send,read,admin")
	if !strings.HasPrefix(secret, "so_") {
		t.Fatalf("keys create printed %q, want only the secret", secret)
	}
	serveArgs := []string{"--db", db, "--transport", "smtp://" + smtpd.Addr + "?tls=none",
		"--retry-base", "50ms", "--attempt-lease", "2s", "--poll-interval", "20ms"}

	var current atomic.Pointer[proc]
	current.Store(startServe(t, serveArgs...))

	const keys = 60
	const dupes = 3 // concurrent clients per key
	kc := newKeyClients(secret, 5*time.Second, 90*time.Second)
	var wg sync.WaitGroup
	for k := range keys {
		key := fmt.Sprintf("crash-key-%03d", k)
		body := fmt.Sprintf(`{"to":"user%d@example.com","subject":"Crash test %d","text":"hello %d"}`, k, k, k)
		for range dupes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				kc.send(t, key, body, func(int) (string, bool) { return current.Load().url, true }, 20*time.Millisecond)
			}()
		}
	}

	// Kill twice: once early, once when most clients are done.
	for _, after := range []int32{keys / 3, keys} {
		for kc.completed.Load() < after && time.Now().Before(kc.deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		old := current.Load()
		old.sigkill(t)
		current.Store(startServe(t, serveArgs...))
	}
	wg.Wait()
	if t.Failed() {
		t.Fatalf("server log:\n%s", current.Load().logText())
	}

	// Every key: one distinct 200 body, one send; then every send decided:
	// sent, or unknown when the kill hit an attempt.
	keyNames := make([]string, keys)
	for k := range keys {
		keyNames[k] = fmt.Sprintf("crash-key-%03d", k)
	}
	url := current.Load().url
	ids := kc.oneSendEach(t, url, keyNames)
	sent, unknown := kc.decided(t, url, ids, 120*time.Second)
	requireRelayedOnce(t, smtpd, sent, unknown)
	t.Logf("%d keys × %d clients, 2 SIGKILLs: %d sends, %d sent, %d unknown, %d messages at the relay, none twice",
		keys, dupes, len(ids), sent, unknown, len(smtpd.Messages()))
}

// TestServe_GracefulShutdown sends SIGTERM and expects a clean exit.
func TestServe_GracefulShutdown(t *testing.T) {
	binaryTest(t)
	db := sqliteDB(t)
	p := startServe(t, "--db", db)
	resp, err := http.Get(p.url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logText())
		}
	case <-ctx.Done():
		t.Fatal("no exit within 30s of SIGTERM")
	}
	if !strings.Contains(p.logText(), "stopped") {
		t.Errorf("no 'stopped' line in the log:\n%s", p.logText())
	}
}
