package main_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/internal/testkit/dovecottest"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// TestPostgres_OneSyncerPerMailboxAcrossProcesses: two sendonce processes
// on one PostgreSQL database, one connected mailbox. Exactly one process
// syncs it (says so in its log) and every message is stored once; when
// that process is SIGKILLed and its lease has run out, the other takes the
// mailbox over and new mail arrives, still once each.
func TestPostgres_OneSyncerPerMailboxAcrossProcesses(t *testing.T) {
	binaryTest(t)
	db := pgtest.NewDatabase(t)
	d := dovecottest.Start(t, dovecottest.Options{})
	now := time.Now()
	for i := range 20 {
		d.Deliver(t, "alice", "INBOX", leaseMail(i), now.Add(-time.Duration(20-i)*time.Minute))
	}
	secret := createKey(t, db, "lease", "send,read,admin")
	args := []string{"--db", db, "--outbound-allow", "127.0.0.0/8", "--poll-interval", "50ms"}

	// The mailbox is connected through a first process, then both start
	// together and race for it.
	setup := startServe(t, args...)
	body := `{"id":"support","address":"support@example.com","imap":"imap://alice:secret@` + d.Addr + `?tls=none"}`
	if status, b := apiCall(t, "POST", setup.url+"/v1/mailboxes", secret, "connect-1", body); status != http.StatusCreated {
		t.Fatalf("connect the mailbox: %d %s", status, b)
	}
	setup.kill()
	expireIMAPLease(t, db) // the setup process may have taken it

	procs := startTogether(t, args, 2)
	waitFor(t, 60*time.Second, "the 20 messages stored", func() bool { return receivedCount(t, db) == 20 })
	d.Deliver(t, "alice", "INBOX", leaseMail(20), time.Now())
	waitFor(t, 30*time.Second, "new mail while idle", func() bool { return receivedCount(t, db) == 21 })
	holder := holders(procs)
	if len(holder) != 1 {
		t.Fatalf("processes that synced the mailbox: %v, want exactly one", holder)
	}
	other := procs[1-holder[0]]

	procs[holder[0]].kill() // SIGKILL: the lease is not given back
	expireIMAPLease(t, db)  // as a minute would
	d.Deliver(t, "alice", "INBOX", leaseMail(21), time.Now())
	waitFor(t, 60*time.Second, "the other process took the mailbox over", func() bool {
		return strings.Contains(other.logText(), "imap sync: holding the mailbox") && receivedCount(t, db) == 22
	})
	if n := distinctReceived(t, db); n != 22 {
		t.Fatalf("%d distinct Message-IDs among the stored messages, want 22 (each once)", n)
	}
}

func leaseMail(i int) []byte {
	return []byte(fmt.Sprintf("From: Ann <ann@example.org>\r\nTo: support@example.com\r\nSubject: question %d\r\n"+
		"Message-ID: <lease-%d@example.org>\r\nDate: Wed, 02 Dec 2026 08:00:00 +0000\r\n\r\nHello %d.\r\n", i, i, i))
}

// startTogether starts n serve processes at once.
func startTogether(t *testing.T, args []string, n int) []*proc {
	t.Helper()
	procs, errs := make([]*proc, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			procs[i], errs[i] = spawnServe(binPath, args...)
		}()
	}
	wg.Wait()
	for i, p := range procs {
		if p != nil {
			t.Cleanup(p.kill)
		}
		if errs[i] != nil {
			t.Fatalf("process %d: %v", i, errs[i])
		}
	}
	return procs
}

// holders lists the processes whose log says they synced the mailbox.
func holders(procs []*proc) []int {
	var out []int
	for i, p := range procs {
		if strings.Contains(p.logText(), "imap sync: holding the mailbox") {
			out = append(out, i)
		}
	}
	return out
}

func pgQueryInt(t *testing.T, db, q string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func receivedCount(t *testing.T, db string) int {
	return pgQueryInt(t, db, `SELECT count(*) FROM received_messages`)
}

func distinctReceived(t *testing.T, db string) int {
	return pgQueryInt(t, db, `SELECT count(DISTINCT message_id) FROM received_messages`)
}

// expireIMAPLease makes every mailbox's lease run out, as time would.
func expireIMAPLease(t *testing.T, db string) {
	t.Helper()
	pgQueryInt(t, db, `WITH u AS (UPDATE imap_sync SET lease_until = 0 RETURNING 1) SELECT count(*) FROM u`)
}
