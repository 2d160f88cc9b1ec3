package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestPurge_DMARCReportsAndSentDraftsGoWithTheirTime: the purge job a
// process runs at start (and every minute) deletes DMARC reports past
// their 400 days and a sent draft whose send it purged after --retention;
// a newer report, a draft never sent and its content stay.
func TestPurge_DMARCReportsAndSentDraftsGoWithTheirTime(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		first := sendoncetest.Start(t, sendoncetest.Options{Backend: b, NoWorkers: true})
		now := first.Clock.Now().UTC()
		ctx := context.Background()
		err := first.Server.Store.InTx(ctx, func(tx core.Tx) error {
			mb := &core.Mailbox{Tenant: "default", ID: "inb_dmarc", Address: "dmarc@purge.test", CreatedAt: now}
			if err := tx.InsertMailbox(ctx, mb); err != nil {
				return err
			}
			// dmr_new comes 300 days on: 101 days old at the purge below.
			for id, age := range map[string]time.Duration{"dmr_old": 0, "dmr_new": 300 * 24 * time.Hour} {
				at := now.Add(age)
				r := &core.DMARCReport{ID: id, Tenant: "default", MailboxID: mb.ID, DedupKey: id, OrgName: "Org", ReportID: id,
					Domain: "purge.test", Begin: at.Add(-24 * time.Hour), End: at, ReceivedAt: at}
				if _, _, err := tx.InsertDMARCReport(ctx, r); err != nil {
					return err
				}
			}
			snd := &core.Send{ID: "snd_sent", Tenant: "default", IdempotencyKey: "draft:drf_sent", MailboxID: "default",
				Status: core.StatusSent, From: "me@purge.test", To: []string{"ann@example.com"}, Subject: "s", Text: "t",
				MessageID: "<snd_sent@purge.test>", CreatedAt: now, UpdatedAt: now}
			if err := tx.InsertSend(ctx, snd); err != nil {
				return err
			}
			for _, id := range []string{"drf_sent", "drf_unsent"} {
				d := &core.Draft{Tenant: "default", ID: id, MailboxID: "default", Content: []byte(`{"subject":"s"}`), Version: 1,
					IdempotencyKey: "draft:" + id, CreatedAt: now, UpdatedAt: now}
				if err := tx.InsertDraft(ctx, d); err != nil {
					return err
				}
			}
			_, err := tx.MarkDraftSent(ctx, "default", "drf_sent", 1, "snd_sent", now)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		first.Close()

		// 401 days on: past the reports' retention for dmr_old only, and
		// past --retention (30 days) for the sent draft's send.
		first.Clock.Advance(401 * 24 * time.Hour)
		again := sendoncetest.Start(t, sendoncetest.Options{Backend: b, DB: first.DB, DBPath: first.DBPath, Clock: first.Clock})
		remaining := func() (reports, drafts int) {
			return again.QueryInt(t, `SELECT count(*) FROM dmarc_reports`), again.QueryInt(t, `SELECT count(*) FROM drafts`)
		}
		deadline := time.Now().Add(30 * time.Second)
		for r, d := remaining(); r != 1 || d != 1; r, d = remaining() {
			if time.Now().After(deadline) {
				t.Fatalf("after the purge at start: %d reports, %d drafts; want 1 of each", r, d)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := again.QueryInt(t, `SELECT count(*) FROM dmarc_reports WHERE id = 'dmr_new'`); n != 1 {
			t.Error("the newer report was purged")
		}
		if n := again.QueryInt(t, `SELECT count(*) FROM drafts WHERE id = 'drf_unsent'`); n != 1 {
			t.Error("the draft never sent was purged")
		}
	})
}
