package main_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/pgtest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestPostgres_ProcessesStartTogetherOnEmptyDatabase: migrations take an
// advisory lock, so processes that start at the same moment all come up.
func TestPostgres_ProcessesStartTogetherOnEmptyDatabase(t *testing.T) {
	db := pgtest.NewDatabase(t)
	var wg sync.WaitGroup
	procs := make([]*proc, 3)
	errs := make([]error, len(procs))
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			procs[i], errs[i] = spawnServe(binPath, "--db", db)
		}()
	}
	wg.Wait()
	for _, p := range procs {
		if p != nil {
			t.Cleanup(p.kill)
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	for i, p := range procs {
		resp, err := http.Get(p.url + "/healthz")
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("process %d: healthz %d\n%s", i, resp.StatusCode, p.logText())
		}
	}
}

// TestPostgres_ThreeProcessesOneKeyOneSend: three sendonce processes on one
// PostgreSQL database take 200 keys × 8 concurrent requests spread across
// them; one process is SIGKILLed midway and its clients move to the
// others. Every key ends with exactly one send, and the relay sees no
// Message-ID twice.
func TestPostgres_ThreeProcessesOneKeyOneSend(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three servers")
	}
	db := pgtest.NewDatabase(t)
	smtpd := smtptest.Start(t, smtptest.Options{})
	args := []string{"--db", db, "--transport", "smtp://" + smtpd.Addr + "?tls=none",
		"--retry-base", "50ms", "--attempt-lease", "2s", "--db-max-conns", "8", "--workers", "8"}
	first := startServe(t, args...) // migrates the empty database
	secret := createKey(t, db, "multi", "send,read,admin")
	procs := []*proc{first, startServe(t, args...), startServe(t, args...)}
	var dead atomic.Int32
	dead.Store(-1)

	const keys, dupes = 200, 8
	var (
		wg  sync.WaitGroup
		sem = make(chan struct{}, 48)
	)
	kc := newKeyClients(secret, 10*time.Second, 3*time.Minute)
	for k := range keys {
		key := fmt.Sprintf("multi-%03d", k)
		body := fmt.Sprintf(`{"to":"user%d@example.com","subject":"Multi %d","text":"hello"}`, k, k)
		for d := range dupes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				kc.send(t, key, body, func(try int) (string, bool) {
					n := (k + d + try) % len(procs)
					return procs[n].url, int32(n) != dead.Load()
				}, 10*time.Millisecond)
			}()
		}
	}
	// SIGKILL the second process once a third of the requests are answered.
	for kc.completed.Load() < keys*dupes/3 && time.Now().Before(kc.deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := procs[1].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dead.Store(1)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	keyNames := make([]string, keys)
	for k := range keys {
		keyNames[k] = fmt.Sprintf("multi-%03d", k)
	}
	sendIDs := kc.oneSendEach(t, procs[0].url, keyNames)
	// Every send gets decided: sent, or unknown where the kill hit an
	// attempt.
	sent, unknown := kc.decided(t, procs[0].url, sendIDs, 2*time.Minute)
	requireRelayedOnce(t, smtpd, sent, unknown)
	t.Logf("%d keys × %d requests over 3 processes, one SIGKILLed: %d sends (%d sent, %d unknown), %d messages at the relay, none twice",
		keys, dupes, len(sendIDs), sent, unknown, len(smtpd.Messages()))
}
