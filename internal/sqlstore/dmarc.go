package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// DMARC aggregate reports: the inboxes that take them, the reports and
// their records (migration 0034).

// IsDMARCInbox implements core.Store.
func (s *Store) IsDMARCInbox(ctx context.Context, tenant, mailboxID string) (bool, error) {
	n, err := queryCount(ctx, s.r, "dmarc inbox", `SELECT count(*) FROM dmarc_inboxes WHERE tenant = ? AND mailbox_id = ?`, tenant, mailboxID)
	return n > 0, err
}

// SetDMARCInbox implements core.Tx.
func (t *Tx) SetDMARCInbox(ctx context.Context, tenant, mailboxID string, on bool) error {
	q := `DELETE FROM dmarc_inboxes WHERE tenant = ? AND mailbox_id = ?`
	if on {
		q = `INSERT INTO dmarc_inboxes (tenant, mailbox_id) VALUES (?, ?) ON CONFLICT (tenant, mailbox_id) DO NOTHING`
	}
	if _, err := t.q.exec(ctx, q, tenant, mailboxID); err != nil {
		return fmt.Errorf("set dmarc inbox: %w", err)
	}
	return nil
}

// DMARCReportCount implements core.Tx.
func (t *Tx) DMARCReportCount(ctx context.Context, tenant string) (int, error) {
	return queryCount(ctx, t.q, "count dmarc reports", `SELECT count(*) FROM dmarc_reports WHERE tenant = ?`, tenant)
}

// DeleteOldestDMARCReports implements core.Tx; the records go with their
// report (ON DELETE CASCADE).
func (t *Tx) DeleteOldestDMARCReports(ctx context.Context, tenant string, n int) error {
	_, err := t.q.exec(ctx, `DELETE FROM dmarc_reports WHERE id IN (SELECT id FROM dmarc_reports
		WHERE tenant = ? ORDER BY received_at, id LIMIT ?)`, tenant, n)
	if err != nil {
		return fmt.Errorf("delete the oldest dmarc reports: %w", err)
	}
	return nil
}

// PurgeDMARCReports implements core.Store: a range of the reports'
// arrival index; the records go with their report (ON DELETE CASCADE).
func (s *Store) PurgeDMARCReports(ctx context.Context, before time.Time) (int, error) {
	n, err := s.w.exec(ctx, `DELETE FROM dmarc_reports WHERE received_at < ?`, micros(before))
	if err != nil {
		return 0, fmt.Errorf("purge dmarc reports: %w", err)
	}
	return int(n), nil
}

// InsertDMARCReport implements core.Tx: the report under the unique
// (tenant, dedup_key), then its records, in the caller's transaction.
func (t *Tx) InsertDMARCReport(ctx context.Context, r *core.DMARCReport) (string, bool, error) {
	policy, err := json.Marshal(r.Policy)
	if err != nil {
		return "", false, err
	}
	n, err := t.q.exec(ctx, `INSERT INTO dmarc_reports (`+dmarcColumns+`, mailbox_id, dedup_key)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, dedup_key) DO NOTHING`,
		r.ID, r.Tenant, r.OrgName, r.Email, r.ExtraContactInfo, r.ReportID, r.Domain, micros(r.Begin), micros(r.End),
		string(policy), r.Messages, r.Pass, r.Fail, r.RecordCount, micros(r.ReceivedAt), r.MailboxID, r.DedupKey)
	if err != nil {
		return "", false, fmt.Errorf("insert dmarc report: %w", err)
	}
	if n == 0 {
		var id string
		err := t.q.queryRow(ctx, `SELECT id FROM dmarc_reports WHERE tenant = ? AND dedup_key = ?`, r.Tenant, r.DedupKey).Scan(&id)
		if err != nil {
			return "", false, fmt.Errorf("dmarc report already stored: %w", err)
		}
		return id, false, nil
	}
	return r.ID, true, t.insertDMARCRecords(ctx, r.ID, r.Records)
}

// dmarcRecordBatch rows per INSERT: 12 values each, well under both
// databases' bound on a statement's parameters.
const dmarcRecordBatch = 64

func (t *Tx) insertDMARCRecords(ctx context.Context, report string, recs []core.DMARCRecord) error {
	for start := 0; start < len(recs); start += dmarcRecordBatch {
		batch := recs[start:min(start+dmarcRecordBatch, len(recs))]
		var q strings.Builder
		q.WriteString(`INSERT INTO dmarc_records (report, n, source_ip, messages, disposition, dkim, spf, pass,
			header_from, envelope_from, envelope_to, detail) VALUES `)
		args := make([]any, 0, 12*len(batch))
		for i, c := range batch {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			detail, err := json.Marshal(recordDetail{Reasons: c.Reasons, DKIM: c.DKIMResults, SPF: c.SPFResults})
			if err != nil {
				return err
			}
			pass := 0
			if c.Pass {
				pass = 1
			}
			args = append(args, report, start+i, c.SourceIP, c.Count, c.Disposition, c.DKIM, c.SPF, pass,
				c.HeaderFrom, c.EnvelopeFrom, c.EnvelopeTo, string(detail))
		}
		if _, err := t.q.exec(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("insert dmarc records: %w", err)
		}
	}
	return nil
}

// recordDetail is a record's detail column.
type recordDetail struct {
	Reasons []core.DMARCReason     `json:"reasons,omitempty"`
	DKIM    []core.DMARCDKIMResult `json:"dkim,omitempty"`
	SPF     []core.DMARCSPFResult  `json:"spf,omitempty"`
}

const dmarcColumns = `id, tenant, org_name, email, extra_contact, report_id, domain, begin_at, end_at, policy,
	messages, pass, fail, record_count, received_at`

func scanDMARCReport(r rowScanner) (*core.DMARCReport, error) {
	var (
		d                    core.DMARCReport
		begin, end, received int64
		policy               string
	)
	err := r.Scan(&d.ID, &d.Tenant, &d.OrgName, &d.Email, &d.ExtraContactInfo, &d.ReportID, &d.Domain, &begin, &end,
		&policy, &d.Messages, &d.Pass, &d.Fail, &d.RecordCount, &received)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("scan dmarc report: %w", err)
	}
	d.Begin, d.End, d.ReceivedAt = fromMicros(begin), fromMicros(end), fromMicros(received)
	if err := json.Unmarshal([]byte(policy), &d.Policy); err != nil {
		return nil, fmt.Errorf("dmarc report policy: %w", err)
	}
	return &d, nil
}

// ListDMARCReports implements core.Store: newest received first (ids are
// ULIDs), a page after f.Before.
func (s *Store) ListDMARCReports(ctx context.Context, f core.DMARCReportFilter) ([]*core.DMARCReport, error) {
	q := `SELECT ` + dmarcColumns + ` FROM dmarc_reports WHERE tenant = ?`
	args := []any{f.Tenant}
	if f.Domain != "" {
		q += ` AND domain = ?`
		args = append(args, f.Domain)
	}
	if f.Before != "" {
		q += ` AND id < ?`
		args = append(args, f.Before)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	return list(ctx, s.r, "list dmarc reports", scanDMARCReport, []*core.DMARCReport{}, q, append(args, f.Limit)...)
}

// DMARCReport implements core.Store.
func (s *Store) DMARCReport(ctx context.Context, tenant, id string) (*core.DMARCReport, error) {
	d, err := scanDMARCReport(s.r.queryRow(ctx, `SELECT `+dmarcColumns+` FROM dmarc_reports WHERE tenant = ? AND id = ?`, tenant, id))
	if err != nil {
		return nil, err
	}
	d.Records, err = list(ctx, s.r, "dmarc records", scanDMARCRecord, []core.DMARCRecord{},
		`SELECT source_ip, messages, disposition, dkim, spf, pass, header_from, envelope_from, envelope_to, detail
		FROM dmarc_records WHERE report = ? ORDER BY n`, d.ID)
	return d, err
}

func scanDMARCRecord(r rowScanner) (core.DMARCRecord, error) {
	var (
		c      core.DMARCRecord
		pass   int
		detail string
		d      recordDetail
	)
	if err := r.Scan(&c.SourceIP, &c.Count, &c.Disposition, &c.DKIM, &c.SPF, &pass, &c.HeaderFrom, &c.EnvelopeFrom,
		&c.EnvelopeTo, &detail); err != nil {
		return c, fmt.Errorf("scan dmarc record: %w", err)
	}
	if err := json.Unmarshal([]byte(detail), &d); err != nil {
		return c, fmt.Errorf("dmarc record detail: %w", err)
	}
	c.Pass, c.Reasons, c.DKIMResults, c.SPFResults = pass == 1, d.Reasons, d.DKIM, d.SPF
	return c, nil
}

// DMARCSources implements core.Store.
func (s *Store) DMARCSources(ctx context.Context, tenant, domain string, since time.Time, limit int) ([]core.DMARCSource, error) {
	return list(ctx, s.r, "dmarc sources", func(r rowScanner) (core.DMARCSource, error) {
		var v core.DMARCSource
		err := r.Scan(&v.SourceIP, &v.Messages, &v.Pass, &v.Fail)
		return v, err
	}, []core.DMARCSource{}, `SELECT c.source_ip, CAST(SUM(c.messages) AS BIGINT),
		CAST(SUM(CASE WHEN c.pass = 1 THEN c.messages ELSE 0 END) AS BIGINT),
		CAST(SUM(CASE WHEN c.pass = 1 THEN 0 ELSE c.messages END) AS BIGINT)
		FROM dmarc_records c JOIN dmarc_reports r ON r.id = c.report
		WHERE r.tenant = ? AND r.domain = ? AND r.end_at >= ?
		GROUP BY c.source_ip ORDER BY 2 DESC, 1 LIMIT ?`, tenant, domain, micros(since), limit)
}

// dayMicros is a day in the unit times are stored in.
const dayMicros = int64(24 * time.Hour / time.Microsecond)

// DMARCDays implements core.Store: per UTC day of the reports' periods'
// start, from the totals kept with each report.
func (s *Store) DMARCDays(ctx context.Context, tenant, domain string, since time.Time) ([]core.DMARCDay, error) {
	return list(ctx, s.r, "dmarc days", func(r rowScanner) (core.DMARCDay, error) {
		var (
			v   core.DMARCDay
			day int64
		)
		err := r.Scan(&day, &v.Pass, &v.Fail)
		v.Day = fromMicros(day * dayMicros)
		return v, err
	}, []core.DMARCDay{}, `SELECT begin_at / `+strconv.FormatInt(dayMicros, 10)+`, CAST(SUM(pass) AS BIGINT),
		CAST(SUM(fail) AS BIGINT) FROM dmarc_reports WHERE tenant = ? AND domain = ? AND end_at >= ?
		GROUP BY 1 ORDER BY 1`, tenant, domain, micros(since))
}
