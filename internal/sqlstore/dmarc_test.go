package sqlstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// TestDMARCReports_OncePerKeyTenantScopedAndTotalled: a report is stored
// once per tenant and dedup key (the second insert answers the first id
// and writes nothing), reads are the tenant's own, the sources and days
// total the records of the window, and a deleted inbox stops taking
// reports.
func TestDMARCReports_OncePerKeyTenantScopedAndTotalled(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		mb := &core.Mailbox{Tenant: "t1", ID: "inb_1", Address: "dmarc@a.test", CreatedAt: now}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			if err := tx.InsertMailbox(ctx, mb); err != nil {
				return err
			}
			return tx.SetDMARCInbox(ctx, "t1", "inb_1", true)
		})
		if on, err := s.IsDMARCInbox(ctx, "t1", "inb_1"); err != nil || !on {
			t.Fatalf("IsDMARCInbox: %v %v", on, err)
		}
		rep := func(id, key string, end time.Time) *core.DMARCReport {
			return &core.DMARCReport{ID: id, Tenant: "t1", MailboxID: "inb_1", DedupKey: key, OrgName: "Org", ReportID: key,
				Domain: "a.test", Begin: end.Add(-24 * time.Hour), End: end, Messages: 7, Pass: 5, Fail: 2, RecordCount: 2,
				ReceivedAt: now, Policy: core.DMARCPolicy{P: "none", Pct: 100},
				Records: []core.DMARCRecord{
					{SourceIP: "192.0.2.1", Count: 5, DKIM: "pass", SPF: "fail", Pass: true,
						DKIMResults: []core.DMARCDKIMResult{{Domain: "a.test", Result: "pass", Aligned: true}}},
					{SourceIP: "192.0.2.2", Count: 2, DKIM: "fail", SPF: "fail", Reasons: []core.DMARCReason{{Type: "forwarded"}}},
				}}
		}
		var first, again string
		var inserted, insertedAgain bool
		inTx(t, s, func(ctx context.Context, tx core.Tx) (err error) {
			first, inserted, err = tx.InsertDMARCReport(ctx, rep("dmr_1", "k1", now))
			return err
		})
		inTx(t, s, func(ctx context.Context, tx core.Tx) (err error) {
			again, insertedAgain, err = tx.InsertDMARCReport(ctx, rep("dmr_2", "k1", now))
			return err
		})
		if first != "dmr_1" || !inserted || again != "dmr_1" || insertedAgain {
			t.Fatalf("inserts: %s %v, then %s %v", first, inserted, again, insertedAgain)
		}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			_, _, err := tx.InsertDMARCReport(ctx, rep("dmr_3", "k-old", now.Add(-30*24*time.Hour)))
			return err
		})
		got, err := s.DMARCReport(ctx, "t1", "dmr_1")
		if err != nil || len(got.Records) != 2 || !got.Records[0].Pass || !got.Records[0].DKIMResults[0].Aligned ||
			got.Records[1].Reasons[0].Type != "forwarded" || got.Policy.Pct != 100 || !got.End.Equal(now) {
			t.Fatalf("DMARCReport: %+v %v", got, err)
		}
		if _, err := s.DMARCReport(ctx, "t2", "dmr_1"); err != core.ErrNotFound {
			t.Fatalf("another tenant's report: %v", err)
		}
		if l, _ := s.ListDMARCReports(ctx, core.DMARCReportFilter{Tenant: "t2", Limit: 10}); len(l) != 0 {
			t.Fatalf("another tenant lists %d", len(l))
		}
		if l, _ := s.ListDMARCReports(ctx, core.DMARCReportFilter{Tenant: "t1", Limit: 10}); len(l) != 2 || l[0].ID != "dmr_3" {
			t.Fatalf("list: %d", len(l))
		}
		srcs, err := s.DMARCSources(ctx, "t1", "a.test", now.Add(-7*24*time.Hour), 10)
		if err != nil || len(srcs) != 2 || srcs[0] != (core.DMARCSource{SourceIP: "192.0.2.1", Messages: 5, Pass: 5}) ||
			srcs[1] != (core.DMARCSource{SourceIP: "192.0.2.2", Messages: 2, Fail: 2}) {
			t.Fatalf("sources: %+v %v", srcs, err)
		}
		days, err := s.DMARCDays(ctx, "t1", "a.test", now.Add(-60*24*time.Hour))
		if err != nil || len(days) != 2 || days[1].Pass != 5 || days[1].Fail != 2 || days[1].Day.After(now) {
			t.Fatalf("days: %+v %v", days, err)
		}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.DeleteMailbox(ctx, "t1", "inb_1") })
		if on, err := s.IsDMARCInbox(ctx, "t1", "inb_1"); err != nil || on {
			t.Fatalf("after the inbox was deleted: %v %v", on, err)
		}
	})
}

// TestDMARCReports_OldestDroppedAndPurged: a tenant's oldest reports go
// first (another tenant's are untouched), the retention purge deletes
// what came before its cutoff, and the records go with their report.
func TestDMARCReports_OldestDroppedAndPurged(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		for _, tenant := range []string{"t1", "t2"} {
			mb := &core.Mailbox{Tenant: tenant, ID: "inb_" + tenant, Address: "dmarc@" + tenant + ".test", CreatedAt: now}
			inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.InsertMailbox(ctx, mb) })
		}
		add := func(tenant, id string, daysAgo int) {
			at := now.Add(-time.Duration(daysAgo) * 24 * time.Hour)
			r := &core.DMARCReport{ID: id, Tenant: tenant, MailboxID: "inb_" + tenant, DedupKey: id, OrgName: "Org", ReportID: id,
				Domain: tenant + ".test", Begin: at.Add(-24 * time.Hour), End: at, Messages: 1, Pass: 1, RecordCount: 1, ReceivedAt: at,
				Records: []core.DMARCRecord{{SourceIP: "192.0.2.1", Count: 1, DKIM: "pass", SPF: "pass", Pass: true}}}
			inTx(t, s, func(ctx context.Context, tx core.Tx) error { _, _, err := tx.InsertDMARCReport(ctx, r); return err })
		}
		add("t2", "dmr_t2", 10)
		add("t1", "dmr_a", 5)
		add("t1", "dmr_b", 3)
		add("t1", "dmr_c", 1)
		ids := func(tenant string) string {
			l, err := s.ListDMARCReports(ctx, core.DMARCReportFilter{Tenant: tenant, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range l {
				out = append(out, r.ID)
			}
			return strings.Join(out, ",")
		}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.DeleteOldestDMARCReports(ctx, "t1", 1) })
		if got, other := ids("t1"), ids("t2"); got != "dmr_c,dmr_b" || other != "dmr_t2" {
			t.Fatalf("after dropping t1's oldest: t1 %s, t2 %s", got, other)
		}
		n, err := s.PurgeDMARCReports(ctx, now.Add(-2*24*time.Hour))
		if err != nil || n != 2 {
			t.Fatalf("purge: %d %v, want dmr_b and dmr_t2", n, err)
		}
		if got, other := ids("t1"), ids("t2"); got != "dmr_c" || other != "" {
			t.Fatalf("after the purge: t1 %s, t2 %s", got, other)
		}
		if n := queryInt(t, s, "SELECT count(*) FROM dmarc_records"); n != 1 {
			t.Fatalf("%d records left, want the one kept report's", n)
		}
	})
}
