package imapsync_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/imapsync"
	"github.com/sendonce/sendonce/internal/netpolicy"
	"github.com/sendonce/sendonce/internal/testkit/dovecottest"
)

// TestSync_InitialNewAndResync: the first sync hands over each message of
// the last Days days once (plain, multipart with a file, a reply; the
// older one is left out, in every pass of a first sync larger than one;
// \Seen says read), a message delivered while the
// syncer idles arrives within seconds, and after a UIDVALIDITY change the
// folder is handed over again (receiving's rule keeps one copy each) and
// the new UIDVALIDITY is what the state holds.
func TestSync_InitialNewAndResync(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		d := dovecottest.Start(t, dovecottest.Options{})
		now := time.Now()
		d.Deliver(t, "alice", "INBOX", plain("old"), now.AddDate(0, 0, -40))
		d.Deliver(t, "alice", "INBOX", plain("p1"), now.Add(-2*time.Hour))
		d.Deliver(t, "alice", "INBOX", multipart("m1"), now.Add(-time.Hour))
		d.Append(t, "alice", "INBOX", reply("r1", "<snd_1@sendonce.test>"), true)

		s := open()
		connect(t, s, d, "support", "")
		_, rec := realReceiver(t, s)
		cfg := testConfig("p1")
		cfg.PollInterval = time.Hour // new mail within seconds only through IDLE
		cfg.MaxPerPass = 2           // the first sync takes two passes, both bounded by date
		stop := run(t, imapsync.New(imapStore(s), opener(s), rec, cfg, nil))

		rec.waitFor(t, "initial sync", 20*time.Second, func(stored, _ int) bool { return stored >= 3 })
		st := waitState(t, s, "support", 10*time.Second, func(st core.IMAPSync) bool { return st.LastUID >= 4 })
		if stored, calls := rec.counts(); stored != 3 || calls != 3 {
			t.Fatalf("initial sync: %d messages in %d calls, want 3 in 3 (the 40-day-old one left out)", stored, calls)
		}
		rec.mu.Lock()
		seen := map[string]bool{}
		for _, in := range rec.calls {
			seen[messageID(in.Raw)] = in.Seen
			if in.Source != "imap" || in.Tenant != "t1" || in.MailboxID != "support" || in.ReceivedAt.IsZero() {
				t.Errorf("incoming %+v: want source imap, tenant t1, mailbox support, a time", in)
			}
		}
		rec.mu.Unlock()
		if !seen["<r1@example.org>"] || seen["<p1@example.org>"] {
			t.Errorf("seen flags %v: want only the reply read", seen)
		}

		// New mail while idle.
		d.Deliver(t, "alice", "INBOX", plain("new"), time.Now())
		rec.waitFor(t, "a message delivered while idling", 10*time.Second, func(stored, _ int) bool { return stored == 4 })

		// The folder's UIDs start over: everything is handed over again,
		// and stored once.
		d.SetUIDValidity(t, "alice", "INBOX", st.UIDValidity+1000)
		d.Kick(t, "alice")
		rec.waitFor(t, "the resync", 20*time.Second, func(_, calls int) bool { return calls >= 8 })
		waitState(t, s, "support", 10*time.Second, func(got core.IMAPSync) bool { return got.UIDValidity == st.UIDValidity+1000 })
		stop()
		if stored, calls := rec.counts(); stored != 4 || calls != 8 {
			t.Fatalf("after the resync: %d messages in %d calls, want 4 in 8", stored, calls)
		}
	})
}

// TestSync_BatchesAndTLS: over implicit TLS with the test CA, a
// mailbox larger than a batch and than a pass comes over whole, its state
// saved batch by batch, and a message over the size limit is skipped, not held.
func TestSync_BatchesAndTLS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		d := dovecottest.Start(t, dovecottest.Options{TLS: true})
		for i := range 7 {
			d.Deliver(t, "alice", "INBOX", plain("b"+string(rune('a'+i))), time.Now().Add(-time.Duration(10-i)*time.Minute))
		}
		big := append(plain("big"), []byte(strings.Repeat("x", 4096))...)
		d.Deliver(t, "alice", "INBOX", big, time.Now())
		s := open()
		connect(t, s, d, "support", "")
		cfg := testConfig("p1")
		cfg.BatchSize, cfg.MaxMessageBytes, cfg.MaxPerPass = 3, 2048, 4
		cfg.Dial.TLS = caTLS(t, d)
		_, rec := realReceiver(t, s)
		run(t, imapsync.New(imapStore(s), opener(s), rec, cfg, nil))
		waitState(t, s, "support", 20*time.Second, func(st core.IMAPSync) bool { return st.LastUID == 8 })
		if stored, calls := rec.counts(); stored != 7 || calls != 7 {
			t.Fatalf("%d messages in %d calls, want the 7 small ones once each", stored, calls)
		}
	})
}

// TestSync_OneSyncerPerMailbox: two processes on one database (two
// stores, two syncers) — only one hands the mailbox's mail over; when it
// stops, the other takes the mailbox over.
func TestSync_OneSyncerPerMailbox(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		d := dovecottest.Start(t, dovecottest.Options{})
		d.Deliver(t, "alice", "INBOX", plain("a1"), time.Now())
		s1, s2 := open(), open()
		connect(t, s1, d, "support", "")
		_, rec := realReceiver(t, s1)
		stop1 := run(t, imapsync.New(imapStore(s1), opener(s1), tagged{rec, "p1"}, testConfig("p1"), nil))
		stop2 := run(t, imapsync.New(imapStore(s2), opener(s2), tagged{rec, "p2"}, testConfig("p2"), nil))
		defer stop2()
		rec.waitFor(t, "the first message", 20*time.Second, func(stored, _ int) bool { return stored == 1 })
		for i := range 3 {
			d.Deliver(t, "alice", "INBOX", plain("more"+string(rune('0'+i))), time.Now())
		}
		rec.waitFor(t, "more messages", 20*time.Second, func(stored, _ int) bool { return stored == 4 })
		rec.mu.Lock()
		holders := len(rec.tagCalls)
		var first string
		for k := range rec.tagCalls {
			first = k
		}
		rec.mu.Unlock()
		if holders != 1 {
			t.Fatalf("two processes synced the mailbox: %v", rec.tagCalls)
		}
		// The holder stops (and lets the lease go): the other goes on.
		if first == "p1" {
			stop1()
		} else {
			stop2()
		}
		d.Deliver(t, "alice", "INBOX", plain("after"), time.Now())
		rec.waitFor(t, "the message after the takeover", 20*time.Second, func(stored, _ int) bool { return stored == 5 })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.tagCalls) != 2 {
			t.Fatalf("the second process did not take over: %v", rec.tagCalls)
		}
	})
}

// TestSync_LoginFailurePausesAndResumes: a refused login pauses the
// mailbox with the class login_failed and one mailbox.disconnected event,
// retried with backoff; once the password is right again it resumes by
// itself (mailbox.connected) and syncs.
func TestSync_LoginFailurePausesAndResumes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		d := dovecottest.Start(t, dovecottest.Options{})
		d.SetPassword(t, "alice", "changed-by-the-owner")
		d.Deliver(t, "alice", "INBOX", plain("waiting"), time.Now())
		s := open()
		connect(t, s, d, "support", "")
		var (
			mu     sync.Mutex
			events []imapsync.Event
		)
		cfg := testConfig("p1")
		cfg.OnEvent = func(_ context.Context, e imapsync.Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e)
		}
		_, rec := realReceiver(t, s)
		run(t, imapsync.New(imapStore(s), opener(s), rec, cfg, nil))
		st := waitState(t, s, "support", 20*time.Second, func(st core.IMAPSync) bool { return st.Failures >= 2 })
		if st.Status != core.IMAPPaused || st.ErrorClass != imapsync.ClassLogin {
			t.Fatalf("state %+v, want paused with class %s", st, imapsync.ClassLogin)
		}
		if stored, _ := rec.counts(); stored != 0 {
			t.Fatalf("a mailbox that cannot log in received %d messages", stored)
		}
		d.SetPassword(t, "alice", "secret")
		rec.waitFor(t, "the sync after the password is right", 20*time.Second, func(stored, _ int) bool { return stored == 1 })
		waitState(t, s, "support", 10*time.Second, func(st core.IMAPSync) bool {
			return st.Status == core.IMAPSyncing && st.ErrorClass == "" && st.Failures == 0
		})
		mu.Lock()
		defer mu.Unlock()
		if len(events) != 2 || events[0].Type != imapsync.EventDisconnected || events[0].Class != imapsync.ClassLogin ||
			events[1].Type != imapsync.EventConnected {
			t.Fatalf("events %+v, want one disconnected (login_failed) then one connected", events)
		}
	})
}

// TestSync_NewPasswordThroughTheAPI: a mailbox stored with a wrong
// password pauses; given the right one (app.Service.SetMailboxIMAP, the
// PUT route's use case) it resumes by itself at its next try.
func TestSync_NewPasswordThroughTheAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		d := dovecottest.Start(t, dovecottest.Options{})
		d.Deliver(t, "alice", "INBOX", plain("waiting"), time.Now())
		s := open()
		svc := app.New(s, app.Config{SecretKey: strings.Repeat("s", 32), Outbound: netpolicy.MustParse("127.0.0.0/8")}, nil)
		m := &core.Mailbox{Tenant: "t1", ID: "support", Address: "support@example.com", CreatedAt: time.Now()}
		if err := svc.ConnectIMAP(m, "imap://alice:wrong@"+d.Addr+"?tls=none"); err != nil {
			t.Fatal(err)
		}
		if err := s.InTx(context.Background(), func(tx core.Tx) error { return tx.InsertMailbox(context.Background(), m) }); err != nil {
			t.Fatal(err)
		}
		rec := newRecorder(svc)
		run(t, imapsync.New(imapStore(s), svc.MailboxIMAP, rec, testConfig("p1"), nil))
		waitState(t, s, "support", 20*time.Second, func(st core.IMAPSync) bool { return st.ErrorClass == imapsync.ClassLogin })
		if _, err := svc.SetMailboxIMAP(context.Background(), "t1", "support", "imap://alice:secret@"+d.Addr+"?tls=none"); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "the sync with the new password", 20*time.Second, func(stored, _ int) bool { return stored == 1 })
		waitState(t, s, "support", 10*time.Second, func(st core.IMAPSync) bool { return st.Status == core.IMAPSyncing })
	})
}
