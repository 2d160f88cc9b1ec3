package imapsync_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/textproto"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/imapsync"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/testkit/dovecottest"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// backends are the databases the syncer's state lives in: SQLite always,
// PostgreSQL when SENDONCE_TEST_POSTGRES_URL is set (required under CI).
var backends = []string{"sqlite", "postgres"}

func forEachBackend(t *testing.T, fn func(t *testing.T, open func() *sqlstore.Store)) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			var addr string
			if b == "postgres" {
				pgtest.URL(t)
				addr = pgtest.NewDatabase(t)
			} else {
				addr = filepath.Join(t.TempDir(), "sendonce.db")
			}
			fn(t, func() *sqlstore.Store {
				t.Helper()
				var (
					s   *sqlstore.Store
					err error
				)
				if b == "postgres" {
					s, err = sqlstore.OpenPostgres(context.Background(), addr, sqlstore.PostgresOptions{})
				} else {
					s, err = sqlstore.Open(context.Background(), addr)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			})
		})
	}
}

// connect stores a mailbox connected to d's user alice.
func connect(t *testing.T, s *sqlstore.Store, d *dovecottest.Dovecot, id, query string) *core.Mailbox {
	t.Helper()
	scheme := "imap"
	if d.CAPEM != nil {
		scheme = "imaps"
	} else if query == "" {
		query = "?tls=none"
	}
	url := fmt.Sprintf("%s://alice:secret@%s%s", scheme, d.Addr, query)
	m := &core.Mailbox{Tenant: "t1", ID: id, Address: id + "@example.com", IMAP: []byte(url), IMAPShown: "x", CreatedAt: time.Now()}
	if err := s.InTx(context.Background(), func(tx core.Tx) error { return tx.InsertMailbox(context.Background(), m) }); err != nil {
		t.Fatal(err)
	}
	return m
}

// testConfig is a syncer's config with waits short enough for tests.
func testConfig(holder string) imapsync.Config {
	return imapsync.Config{
		Holder: holder, Lease: 3 * time.Second, Rescan: 100 * time.Millisecond,
		BackoffBase: 100 * time.Millisecond, BackoffMax: 400 * time.Millisecond,
		PollInterval: 200 * time.Millisecond, IdleRefresh: 5 * time.Second,
	}
}

// opener opens stored URLs as the server does.
// imapStore is the service's view of s the workers get (app.IMAPStore).
func imapStore(s core.Store) app.IMAPStore { return app.New(s, app.Config{}, nil).IMAPStore() }

func opener(s core.Store) imapsync.Opener {
	return app.New(s, app.Config{}, nil).MailboxIMAP
}

// recorder hands each message to the real receiver (app.Service.Receive:
// receiving's own rule recognises a message it has) and keeps what it was
// handed and what receiving answered: the seam between the syncer and
// receiving, observed, not re-implemented.
type recorder struct {
	recv     imapsync.Receiver
	mu       sync.Mutex
	calls    []app.Incoming
	stored   int
	changed  chan struct{}
	tagCalls map[string]int
}

func newRecorder(recv imapsync.Receiver) *recorder {
	return &recorder{recv: recv, changed: make(chan struct{}, 1), tagCalls: map[string]int{}}
}

// realReceiver is the receiving of a process on s, and a recorder over it.
func realReceiver(t *testing.T, s core.Store) (*app.Service, *recorder) {
	t.Helper()
	svc := app.New(s, app.Config{}, nil)
	return svc, newRecorder(svc)
}

func (r *recorder) Receive(ctx context.Context, in app.Incoming) (app.Received, error) {
	return r.receive(ctx, in, "")
}

func (r *recorder) receive(ctx context.Context, in app.Incoming, tag string) (app.Received, error) {
	got, err := r.recv.Receive(ctx, in)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, in)
	r.tagCalls[tag]++
	if err == nil && !got.Duplicate {
		r.stored++
	}
	select {
	case r.changed <- struct{}{}:
	default:
	}
	return got, err
}

// tagged is a receiver that counts its calls under tag (which syncer).
type tagged struct {
	r   *recorder
	tag string
}

func (t tagged) Receive(ctx context.Context, in app.Incoming) (app.Received, error) {
	return t.r.receive(ctx, in, t.tag)
}

// stored is how many distinct messages were received; calls how many
// times Receive was called.
func (r *recorder) counts() (stored, calls int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stored, len(r.calls)
}

// waitFor waits (bounded) until cond holds of the recorder.
func (r *recorder) waitFor(t *testing.T, what string, timeout time.Duration, cond func(stored, calls int) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if stored, calls := r.counts(); cond(stored, calls) {
			return
		}
		select {
		case <-r.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline.C:
			stored, calls := r.counts()
			t.Fatalf("%s: not within %v (stored %d, calls %d)", what, timeout, stored, calls)
		}
	}
}

func messageID(raw []byte) string {
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw))).ReadMIMEHeader()
	if err != nil && len(h) == 0 {
		return ""
	}
	return h.Get("Message-Id")
}

// plain, multipart and reply are the seeded kinds of message.
func plain(id string) []byte {
	return []byte("From: Ann <ann@example.org>\r\nTo: alice@example.com\r\nSubject: plain " + id +
		"\r\nDate: Tue, 1 Dec 2026 10:00:00 +0000\r\nMessage-ID: <" + id + "@example.org>\r\n\r\nhello " + id + "\r\n")
}

func multipart(id string) []byte {
	return []byte("From: Bob <bob@example.org>\r\nTo: alice@example.com\r\nSubject: files " + id +
		"\r\nMessage-ID: <" + id + "@example.org>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n--b1\r\nContent-Type: application/pdf\r\n" +
		"Content-Disposition: attachment; filename=\"a.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b1--\r\n")
}

func reply(id, to string) []byte {
	return []byte("From: Cy <cy@example.org>\r\nTo: alice@example.com\r\nSubject: Re: your order\r\nMessage-ID: <" + id +
		"@example.org>\r\nIn-Reply-To: " + to + "\r\nReferences: " + to + "\r\n\r\nthanks\r\n")
}

// run starts syncer until the test ends (or stop is called), and waits
// for it to return.
func run(t *testing.T, s *imapsync.Syncer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Error("the syncer did not stop within 15 s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// state reads the mailbox's sync state (zero before the first).
func state(t *testing.T, s core.Store, mailboxID string) core.IMAPSync {
	t.Helper()
	st, err := s.IMAPSyncState(context.Background(), "t1", mailboxID)
	if err != nil {
		return core.IMAPSync{}
	}
	return *st
}

// waitState waits (bounded) until the mailbox's sync state satisfies cond.
func waitState(t *testing.T, s core.Store, mailboxID string, timeout time.Duration, cond func(core.IMAPSync) bool) core.IMAPSync {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := state(t, s, mailboxID)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("sync state %+v: not as awaited within %v", st, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Store is a process's store.
type Store = sqlstore.Store

// caTLS trusts d's test CA.
func caTLS(t *testing.T, d *dovecottest.Dovecot) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(d.CAPEM) {
		t.Fatal("no CA")
	}
	return &tls.Config{RootCAs: pool}
}
