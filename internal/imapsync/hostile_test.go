package imapsync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/imapsync"
	"github.com/sendonce/sendonce/internal/testkit/dovecottest"
)

// TestSync_HostileServerPausesOnlyItsMailbox: mailboxes pointed at servers
// that answer what no honest server would — a search naming UID 0, one
// naming 200 million or all four billion UIDs in 40 bytes, a line without
// end, a literal of 5 GB — are each paused with the class server_limit,
// in bounded memory and without a panic (the test binary lives); one
// naming every UID but whose UIDNEXT says 4 costs one FETCH of 1:3; and
// a mailbox on Dovecot beside them goes on receiving all the while.
func TestSync_HostileServerPausesOnlyItsMailbox(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		d := dovecottest.Start(t, dovecottest.Options{})
		d.Deliver(t, "alice", "INBOX", plain("calm1"), time.Now())
		s := open()
		connect(t, s, d, "calm", "")
		esearch := `* ESEARCH (TAG "%TAG%") UID ALL `
		hostile := map[string]*imapsync.ScriptedServer{
			"zero":    {Exists: "3", UIDNext: "4", Search: "* SEARCH 0"},
			"star":    {Exists: "3", UIDNext: "4", Search: esearch + "2:*"},
			"many":    {Exists: "3", UIDNext: "200000001", Search: esearch + "1:200000000"},
			"wrap":    {Exists: "3", UIDNext: "4294967295", Search: esearch + "1:4294967295"},
			"line":    {Exists: "3", UIDNext: "4", Search: "* SEARCH " + strings.Repeat("1 ", 100_000)},
			"literal": {Exists: "3", UIDNext: "4", Search: "* OK {5000000000}"},
		}
		clamped := imapsync.StartScripted(t, "127.0.0.2", &imapsync.ScriptedServer{Exists: "3", UIDNext: "4", Search: esearch + "1:4294967295"})
		storeIMAP(t, s, "clamped", clamped.Addr)
		for id, srv := range hostile {
			imapsync.StartScripted(t, "127.0.0.2", srv)
			storeIMAP(t, s, id, srv.Addr)
		}
		svc, rec := realReceiver(t, s)
		cfg := testConfig("p1")
		cfg.Dial.MaxLineBytes = 64 << 10
		run(t, imapsync.New(imapStore(s), svc.MailboxIMAP, rec, cfg, nil))

		rec.waitFor(t, "the calm mailbox's first message", 20*time.Second, func(stored, _ int) bool { return stored == 1 })
		for id := range hostile {
			st := waitState(t, s, id, 20*time.Second, func(st core.IMAPSync) bool { return st.Status == core.IMAPPaused })
			// go-imap's decoder refuses "2:*" in an ESEARCH itself: the
			// session ends as a lost connection, paused all the same.
			if (st.ErrorClass != imapsync.ClassLimit && id != "star") || st.LastUID != 0 {
				t.Errorf("%s: state %+v, want paused with class %s and nothing taken", id, st, imapsync.ClassLimit)
			}
		}
		waitState(t, s, "clamped", 20*time.Second, func(st core.IMAPSync) bool { return st.LastUID == 3 })
		if got := clamped.Fetched(); len(got) == 0 || got[0] != "1:3" {
			t.Errorf("the clamped mailbox fetched %q, want 1:3", got)
		}
		if st := state(t, s, "clamped"); st.Status == core.IMAPPaused {
			t.Errorf("the clamped mailbox paused: %+v", st)
		}
		// The other mailbox still syncs, after every hostile one paused.
		d.Deliver(t, "alice", "INBOX", plain("calm2"), time.Now())
		rec.waitFor(t, "the calm mailbox's next message", 20*time.Second, func(stored, _ int) bool { return stored == 2 })
		if st := state(t, s, "calm"); st.Status == core.IMAPPaused {
			t.Errorf("the calm mailbox paused: %+v", st)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, in := range rec.calls {
			if in.MailboxID != "calm" {
				t.Errorf("a message of %s was received", in.MailboxID)
			}
		}
		if !slices.ContainsFunc(rec.calls, func(in app.Incoming) bool { return messageID(in.Raw) == "<calm2@example.org>" }) {
			t.Error("calm2 not received")
		}
	})
}

// storeIMAP stores a mailbox connected (without TLS) to the server at addr.
func storeIMAP(t *testing.T, s *Store, id, addr string) {
	t.Helper()
	m := &core.Mailbox{Tenant: "t1", ID: id, Address: id + "@example.com",
		IMAP: fmt.Appendf(nil, "imap://u:p@%s?tls=none", addr), IMAPShown: "x", CreatedAt: time.Now()}
	if err := s.InTx(context.Background(), func(tx core.Tx) error { return tx.InsertMailbox(context.Background(), m) }); err != nil {
		t.Fatal(err)
	}
}
