package sqlstore_test

// The store's conformance suite, on the kit in kit_test.go.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// at is a time with microsecond precision, as the store keeps times.
func at(sec int) time.Time { return time.Unix(1_800_000_000+int64(sec), 123456000).UTC() }

func newSend(id string, status core.Status, created time.Time) *core.Send {
	return &core.Send{
		ID: id, Tenant: "t", IdempotencyKey: "key-" + id, MailboxID: "default", Status: status,
		From: `"Me" <me@example.com>`, To: []string{"ann@example.com"}, Subject: "subject " + id,
		Text: "text", HTML: "<p>html</p>", MessageID: "<" + id + "@example.com>",
		Headers: []core.Header{{Name: "X-A", Value: "b"}}, Tags: map[string]string{"k": "v"},
		CreatedAt: created, UpdatedAt: created,
	}
}

func TestOpen_MigrationsApplyOnceAndReopen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		addr := b.newDB(t)
		s := b.openStore(t, addr)
		if err := s.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s2 := b.openStore(t, addr) // migrations already applied: must not fail
		if _, err := s2.ListAPIKeys(context.Background()); err != nil {
			t.Fatalf("schema missing after reopen: %v", err)
		}
		if n, want := queryInt(t, s2, "SELECT count(*) FROM sendonce_migrations"), migrations(t, b.name); n != want {
			t.Fatalf("%d migrations recorded, want %d, each once", n, want)
		}
	})
}

func TestInTx_PanicReleasesTheWriter(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic was swallowed")
				}
			}()
			_ = s.InTx(ctx, func(tx core.Tx) error {
				if err := tx.InsertSend(ctx, newSend("snd_panic", core.StatusQueued, at(0))); err != nil {
					return err
				}
				panic("boom")
			})
		}()
		done := make(chan error, 1)
		go func() { done <- s.InTx(ctx, func(tx core.Tx) error { return nil }) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the write connection is still held after a panic")
		}
		if _, err := s.Send(ctx, "t", "snd_panic"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("the panicking transaction's send: %v, want it rolled back", err)
		}
	})
}

func TestInTx_ErrorRollsBack(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		injected := errors.New("injected")
		err := s.InTx(ctx, func(tx core.Tx) error {
			if err := tx.InsertSend(ctx, newSend("snd_rolled", core.StatusQueued, at(0))); err != nil {
				return err
			}
			if err := tx.AddEvent(ctx, "snd_rolled", core.Event{Type: "accepted", At: at(0)}); err != nil {
				return err
			}
			return injected
		})
		if !errors.Is(err, injected) {
			t.Fatalf("InTx = %v, want fn's error", err)
		}
		if _, err := s.Send(ctx, "t", "snd_rolled"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("send after rollback: %v, want not found", err)
		}
		if n := queryInt(t, s, "SELECT count(*) FROM send_events"); n != 0 {
			t.Fatalf("%d events after rollback, want 0", n)
		}
	})
}

// Code inside a write transaction reads through the store (a mailbox, a
// suppression) while it holds its connection. More such transactions at
// once than there are connections must all finish, not wait for each other.
func TestInTx_ReadsInsideTransactionsDoNotStarve(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		const n = 40 // more than the default PostgreSQL pool of 20
		errs := make(chan error, n)
		for range n {
			go func() {
				errs <- s.InTx(ctx, func(tx core.Tx) error {
					time.Sleep(10 * time.Millisecond) // let the others take their connections
					_, err := s.IsSuppressed(ctx, "t", "x@example.com")
					return err
				})
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("a transaction that reads: %v", err)
			}
		}
	})
}

func TestAPIKeys_RoundTrip(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		plain := &core.APIKey{ID: "k1", Tenant: "t", Name: "plain", SecretHash: []byte{0, 1, 0xfe, 0xff},
			Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}, CreatedAt: at(1)}
		gated := &core.APIKey{ID: "k2", Tenant: "u", Name: "gated", SecretHash: []byte("hash"),
			Scopes: []core.Scope{core.ScopeSend}, Mailboxes: []string{"a", "b"}, RequiresApproval: true, CreatedAt: at(2)}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			if err := tx.InsertAPIKey(ctx, plain); err != nil {
				return err
			}
			return tx.InsertAPIKey(ctx, gated)
		})
		for _, want := range []*core.APIKey{plain, gated} {
			got, err := s.APIKey(ctx, want.ID)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
				t.Errorf("APIKey(%s)\n got %+v\nwant %+v", want.ID, got, want)
			}
		}
		if _, err := s.APIKey(ctx, "nope"); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("unknown key: %v, want ErrNotFound", err)
		}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.RevokeAPIKey(ctx, "k1", at(10)) })
		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.RevokeAPIKey(ctx, "k1", at(20)) })
		if k, _ := s.APIKey(ctx, "k1"); k.RevokedAt == nil || !k.RevokedAt.Equal(at(10)) {
			t.Errorf("revoked_at = %v, want the first revocation %v", k.RevokedAt, at(10))
		}
		if err := s.InTx(ctx, func(tx core.Tx) error { return tx.RevokeAPIKey(ctx, "nope", at(0)) }); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("revoke unknown: %v, want ErrNotFound", err)
		}
		keys, err := s.ListAPIKeys(ctx)
		if err != nil || len(keys) != 2 || keys[0].ID != "k1" || keys[1].ID != "k2" {
			t.Fatalf("ListAPIKeys = %v, %v; want k1, k2 in creation order", keys, err)
		}
	})
}

func TestSends_RoundTripEventsAndUpdate(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		want := newSend("snd_1", core.StatusQueued, at(0))
		want.Cc, want.Bcc, want.ReplyTo = []string{"c@example.com"}, []string{"b@example.com"}, []string{"r@example.com"}
		want.Subject, want.TemplateID, want.Stream = "Grüße ✓", "tpl", core.StreamBulk
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			if err := tx.InsertSend(ctx, want); err != nil {
				return err
			}
			for i, typ := range []string{"accepted", "attempt_started", "attempt_failed"} {
				if err := tx.AddEvent(ctx, want.ID, core.Event{Type: typ, At: at(i), Detail: "d" + typ}); err != nil {
					return err
				}
			}
			return nil
		})
		got, events, err := s.SendWithEvents(ctx, "t", want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("send\n got %+v\nwant %+v", got, want)
		}
		var types []string
		for _, e := range events {
			types = append(types, e.Type)
		}
		if !slices.Equal(types, []string{"accepted", "attempt_started", "attempt_failed"}) || !events[2].At.Equal(at(2)) || events[2].Detail != "dattempt_failed" {
			t.Errorf("events %+v, want the three in order", events)
		}
		if _, _, err := s.SendWithEvents(ctx, "other", want.ID); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("another tenant's send: %v, want ErrNotFound", err)
		}

		lease, sent := at(30), at(40)
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			u, err := tx.SendForUpdate(ctx, want.ID)
			if err != nil {
				return err
			}
			u.Status, u.Attempts, u.LastError, u.AttemptToken, u.LeaseUntil, u.SentAt, u.UpdatedAt =
				core.StatusSent, 2, "451 later", "tok", &lease, &sent, at(40)
			return tx.UpdateSend(ctx, u)
		})
		u, err := s.Send(ctx, "t", want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if u.Status != core.StatusSent || u.Attempts != 2 || u.LastError != "451 later" || u.AttemptToken != "tok" ||
			!u.LeaseUntil.Equal(lease) || !u.SentAt.Equal(sent) || !u.UpdatedAt.Equal(at(40)) || !u.CreatedAt.Equal(at(0)) {
			t.Errorf("after update: %+v", u)
		}
		err = s.InTx(ctx, func(tx core.Tx) error { return tx.UpdateSend(ctx, newSend("snd_nope", core.StatusSent, at(0))) })
		if !errors.Is(err, core.ErrNotFound) {
			t.Errorf("update unknown: %v, want ErrNotFound", err)
		}
		err = s.InTx(ctx, func(tx core.Tx) error {
			_, err := tx.SendForUpdate(ctx, "snd_nope")
			return err
		})
		if !errors.Is(err, core.ErrNotFound) {
			t.Errorf("SendForUpdate unknown: %v, want ErrNotFound", err)
		}
	})
}

func TestSends_ListFiltersPaginatesAndPurges(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		statuses := []core.Status{core.StatusSent, core.StatusQueued, core.StatusFailed, core.StatusSending, core.StatusCanceled, core.StatusUnknown}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for i, st := range statuses {
				snd := newSend(fmt.Sprintf("snd_%02d", i), st, at(i))
				if err := tx.InsertSend(ctx, snd); err != nil {
					return err
				}
				if err := tx.AddEvent(ctx, snd.ID, core.Event{Type: "accepted", At: at(i)}); err != nil {
					return err
				}
				if err := tx.InsertInboxMessage(ctx, &core.InboxMessage{ID: fmt.Sprintf("msg_%02d", i), Tenant: "t", SendID: snd.ID,
					MessageID: snd.MessageID, From: "me@example.com", To: snd.To, Subject: snd.Subject, Raw: []byte("raw"), ReceivedAt: at(i)}); err != nil {
					return err
				}
			}
			other := newSend("snd_other", core.StatusQueued, at(0))
			other.Tenant = "other"
			return tx.InsertSend(ctx, other)
		})

		var all []string
		after := ""
		for range 10 {
			page, next, err := s.ListSends(ctx, "t", core.SendFilter{Limit: 4, After: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range page {
				all = append(all, p.ID)
			}
			if next == "" {
				break
			}
			after = next
		}
		if want := []string{"snd_05", "snd_04", "snd_03", "snd_02", "snd_01", "snd_00"}; !slices.Equal(all, want) {
			t.Fatalf("pages %v, want %v (newest first, each once)", all, want)
		}
		if l, next, err := s.ListSends(ctx, "t", core.SendFilter{Limit: 10, Status: core.StatusQueued}); err != nil || len(l) != 1 || l[0].ID != "snd_01" || next != "" {
			t.Errorf("status filter: %v %q %v", l, next, err)
		}
		if l, _, err := s.ListSends(ctx, "t", core.SendFilter{Limit: 10, IdempotencyKey: "key-snd_03"}); err != nil || len(l) != 1 || l[0].ID != "snd_03" {
			t.Errorf("key filter: %v %v", l, err)
		}
		if n, err := s.QueueDepth(ctx); err != nil || n != 3 { // queued, sending, other tenant's queued
			t.Errorf("QueueDepth = %d, %v; want 3", n, err)
		}
		if l, err := s.ListInbox(ctx, "t", 2); err != nil || len(l) != 2 || l[0].ID != "msg_05" || l[1].ID != "msg_04" {
			t.Errorf("ListInbox: %v %v; want msg_05, msg_04", l, err)
		}

		// Finished sends (sent, failed, canceled) before the cutoff go,
		// with their events and captured messages; the rest stay.
		n, err := s.PurgeSends(ctx, at(4))
		if err != nil || n != 2 {
			t.Fatalf("PurgeSends = %d, %v; want 2 (snd_00 sent, snd_02 failed)", n, err)
		}
		for _, id := range []string{"snd_00", "snd_02"} {
			if _, err := s.Send(ctx, "t", id); !errors.Is(err, core.ErrNotFound) {
				t.Errorf("%s after purge: %v", id, err)
			}
		}
		events := queryInt(t, s, "SELECT count(*) FROM send_events WHERE send_id IN (?, ?)", "snd_00", "snd_02")
		inbox := queryInt(t, s, "SELECT count(*) FROM inbox_messages WHERE send_id IN (?, ?)", "snd_00", "snd_02")
		if events != 0 || inbox != 0 {
			t.Errorf("after purge: %d events, %d captured messages of purged sends; want 0", events, inbox)
		}
		if _, err := s.Send(ctx, "t", "snd_04"); err != nil {
			t.Errorf("snd_04 (canceled at the cutoff) was purged: %v", err)
		}
	})
}

func TestExpiredAttempts_EachClaimedOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		const n = 12
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for i := range n {
				snd := newSend(fmt.Sprintf("snd_%02d", i), core.StatusSending, at(0))
				lease := at(10 + i%3) // all before now = at(100)
				snd.LeaseUntil = &lease
				if err := tx.InsertSend(ctx, snd); err != nil {
					return err
				}
			}
			live := newSend("snd_live", core.StatusSending, at(0))
			lease := at(1000)
			live.LeaseUntil = &lease
			return tx.InsertSend(ctx, live)
		})
		// Rescuers claim in batches of 5 at once: every expired send is
		// claimed by exactly one of them, the live one by none.
		var (
			mu      sync.Mutex
			claimed []string
			wg      sync.WaitGroup
		)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var mine []string
					err := s.InTx(ctx, func(tx core.Tx) error {
						sends, err := tx.ExpiredAttempts(ctx, at(100), 5)
						if err != nil {
							return err
						}
						mine = nil
						for _, snd := range sends {
							snd.Status, snd.LeaseUntil = core.StatusUnknown, nil
							if err := tx.UpdateSend(ctx, snd); err != nil {
								return err
							}
							mine = append(mine, snd.ID)
						}
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					if len(mine) == 0 {
						return
					}
					mu.Lock()
					claimed = append(claimed, mine...)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		slices.Sort(claimed)
		if len(claimed) != n || len(slices.Compact(slices.Clone(claimed))) != n || slices.Contains(claimed, "snd_live") {
			t.Fatalf("claimed %v; want each of the %d expired sends once", claimed, n)
		}
	})
}

func TestTemplatesMailboxesDomains_RoundTrip(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		var created []bool
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for _, tp := range []*core.Template{
				{Tenant: "t", ID: "welcome", Subject: "v1", Text: "x", Compat: `{"name":"Welcome"}`, CreatedAt: at(0), UpdatedAt: at(0)},
				// A native replace (no Compat) keeps the stored compat.
				{Tenant: "t", ID: "welcome", Subject: "v2", Text: "y", HTML: "<p>", CreatedAt: at(5), UpdatedAt: at(5)},
			} {
				c, err := tx.PutTemplate(ctx, tp)
				if err != nil {
					return err
				}
				created = append(created, c)
			}
			return nil
		})
		if !slices.Equal(created, []bool{true, false}) {
			t.Errorf("PutTemplate created = %v, want true then false", created)
		}
		tp, err := s.Template(ctx, "t", "welcome")
		if err != nil || tp.Subject != "v2" || tp.HTML != "<p>" || tp.Compat != `{"name":"Welcome"}` || !tp.CreatedAt.Equal(at(0)) || !tp.UpdatedAt.Equal(at(5)) {
			t.Errorf("template after replace: %+v %v", tp, err)
		}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.DeleteTemplate(ctx, "t", "welcome") })
		if l, err := s.ListTemplates(ctx, "t"); err != nil || len(l) != 0 {
			t.Errorf("templates after delete: %v %v", l, err)
		}
		if err := s.InTx(ctx, func(tx core.Tx) error { return tx.DeleteTemplate(ctx, "t", "welcome") }); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("delete deleted: %v", err)
		}

		mb := &core.Mailbox{Tenant: "t", ID: "news", Address: "news@example.com", Name: "News", ReceiveOnly: true, CreatedAt: at(1)}
		insertTwice(t, s, "InsertMailbox", func(ctx context.Context, tx core.Tx) error { return tx.InsertMailbox(ctx, mb) })
		if got, err := s.Mailbox(ctx, "t", "news"); err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", mb) {
			t.Errorf("mailbox %+v %v, want %+v", got, err, mb)
		}

		d := &core.Domain{Tenant: "t", Domain: "example.com", Selector: "s1", Algorithm: "ed25519",
			PrivateKey: []byte("-----BEGIN PRIVATE KEY-----\n\x00\xff"), PublicRecord: "v=DKIM1; k=ed25519; p=x", Status: core.DomainNotStarted, CreatedAt: at(2)}
		insertTwice(t, s, "InsertDomain", func(ctx context.Context, tx core.Tx) error { return tx.InsertDomain(ctx, d) })
		if got, err := s.Domain(ctx, "t", "example.com"); err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", d) {
			t.Errorf("domain %+v %v, want %+v", got, err, d)
		}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			return tx.SetDomainStatus(ctx, "t", "example.com", core.DomainVerified)
		})
		if got, err := s.Domain(ctx, "t", "example.com"); err != nil || got.Status != core.DomainVerified {
			t.Errorf("domain after SetDomainStatus: %+v %v", got, err)
		}
		if err := s.InTx(ctx, func(tx core.Tx) error { return tx.SetDomainStatus(ctx, "t", "missing.example", core.DomainFailed) }); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("SetDomainStatus of a missing domain: %v", err)
		}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.DeleteDomain(ctx, "t", "example.com") })
		if _, err := s.Domain(ctx, "t", "example.com"); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("domain after delete: %v", err)
		}
	})
}

func TestSuppressions_AreCaseInsensitive(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		if _, err := s.Exec(ctx, "INSERT INTO suppressions (tenant, address, reason, created_at) VALUES (?, ?, ?, ?)",
			"t", "x@example.com", "bounce", 0); err != nil {
			t.Fatalf("insert suppression: %v", err)
		}
		for addr, want := range map[string]bool{"X@Example.COM": true, "x@example.com": true, "y@example.com": false} {
			if got, err := s.IsSuppressed(ctx, "t", addr); err != nil || got != want {
				t.Errorf("IsSuppressed(%s) = %v, %v; want %v", addr, got, err, want)
			}
		}
		if got, _ := s.IsSuppressed(ctx, "other", "x@example.com"); got {
			t.Errorf("suppressed in another tenant")
		}
	})
}

// TestPurgeAudit_DropsOnlyOldEntries: the audit log was never purged; the
// periodic purge now drops entries older than the audit retention.
func TestPurgeAudit_DropsOnlyOldEntries(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		now := time.Now().UTC().Truncate(time.Millisecond)
		old, recent := now.Add(-100*24*time.Hour), now.Add(-time.Hour)
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for i, when := range []time.Time{old, old.Add(time.Minute), recent} {
				id := "aud_" + strings.ToLower(ulid.MustNew(ulid.Timestamp(when), ulid.DefaultEntropy()).String())
				e := &core.AuditEntry{ID: id, Tenant: "default", APIKeyID: "k", At: when, Route: "POST /v1/send", Status: 200, Outcome: fmt.Sprint("ok", i)}
				if err := tx.InsertAudit(ctx, e); err != nil {
					return err
				}
			}
			return nil
		})
		n, err := s.PurgeAudit(context.Background(), now.Add(-90*24*time.Hour))
		if err != nil || n != 2 {
			t.Fatalf("PurgeAudit = %d, %v; want 2", n, err)
		}
		if left := queryInt(t, s, `SELECT COUNT(*) FROM audit_log`); left != 1 {
			t.Fatalf("%d entries left, want the recent one", left)
		}
	})
}

// insertTwice runs insert in a transaction, which must succeed, and again
// in another, which must be refused as a conflict.
func insertTwice(t *testing.T, s *sqlstore.Store, name string, insert func(ctx context.Context, tx core.Tx) error) {
	t.Helper()
	inTx(t, s, insert)
	ctx := context.Background()
	if err := s.InTx(ctx, func(tx core.Tx) error { return insert(ctx, tx) }); core.ErrorCode(err) != core.CodeConflict {
		t.Errorf("second %s: %v, want conflict", name, err)
	}
}
