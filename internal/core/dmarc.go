package core

import (
	"context"
	"time"
)

// DMARC aggregate reports (RFC 7489 rua), received at an inbox marked
// for them and kept once per reporter and report id
// (docs/deliverability.md, "DMARC aggregate reports").

// MaxDMARCReportsPerTenant bounds the reports a tenant keeps: anyone may
// mail a report address, each with a new report id. Past it the oldest
// reports give way to the new one, so a flood of reports can push old
// ones out but never stop the next real one being kept.
const MaxDMARCReportsPerTenant = 50000

// DMARCReportRetention is how long a report is kept after it came: past
// the longest summary (a year, the dashboard's widest chart), so that
// every period a reader can ask for is whole.
const DMARCReportRetention = 400 * 24 * time.Hour

// DMARCReport is one stored aggregate report.
type DMARCReport struct {
	ID        string // "dmr_…"
	Tenant    string
	MailboxID string
	// DedupKey is the reporter (org name and email) and its report id:
	// the same report mailed again is the same report.
	DedupKey         string
	OrgName          string
	Email            string
	ExtraContactInfo string
	ReportID         string
	Domain           string
	Begin, End       time.Time
	Policy           DMARCPolicy
	// Messages, Pass and Fail total the records' counts (pass: DKIM or
	// SPF aligned and passing).
	Messages, Pass, Fail int64
	RecordCount          int
	ReceivedAt           time.Time
	// Records are filled by the one-report read only.
	Records []DMARCRecord
}

// DMARCPolicy is the policy the reporter saw published.
type DMARCPolicy struct {
	ADKIM string `json:"adkim"`
	ASPF  string `json:"aspf"`
	P     string `json:"p"`
	SP    string `json:"sp"`
	Pct   int    `json:"pct"`
}

// DMARCRecord is one source IP's row of a report.
type DMARCRecord struct {
	SourceIP    string
	Count       int64
	Disposition string
	// DKIM and SPF are the DMARC-aligned results (policy_evaluated).
	DKIM, SPF    string
	Pass         bool
	HeaderFrom   string
	EnvelopeFrom string
	EnvelopeTo   string
	Reasons      []DMARCReason
	DKIMResults  []DMARCDKIMResult
	SPFResults   []DMARCSPFResult
}

// DMARCReason is why a disposition differs from the policy.
type DMARCReason struct {
	Type    string `json:"type"`
	Comment string `json:"comment,omitempty"`
}

// DMARCDKIMResult is one DKIM signature's result, and whether its
// domain is aligned with the header From.
type DMARCDKIMResult struct {
	Domain      string `json:"domain"`
	Selector    string `json:"selector,omitempty"`
	Result      string `json:"result"`
	HumanResult string `json:"human_result,omitempty"`
	Aligned     bool   `json:"aligned"`
}

// DMARCSPFResult is one SPF result, and whether its domain is aligned.
type DMARCSPFResult struct {
	Domain  string `json:"domain"`
	Scope   string `json:"scope,omitempty"`
	Result  string `json:"result"`
	Aligned bool   `json:"aligned"`
}

// DMARCReportFilter selects reports for a list, newest period first.
type DMARCReportFilter struct {
	Tenant string
	Domain string // "" for all
	// Before is the id of the last report of the previous page ("" for
	// the first page).
	Before string
	Limit  int
}

// DMARCSource is one source IP over a window.
type DMARCSource struct {
	SourceIP             string
	Messages, Pass, Fail int64
}

// DMARCDay is one day's pass and fail (by the report period's start).
type DMARCDay struct {
	Day        time.Time
	Pass, Fail int64
}

// DMARCReports reads stored reports.
type DMARCReports interface {
	// IsDMARCInbox reports whether the mailbox takes DMARC reports.
	IsDMARCInbox(ctx context.Context, tenant, mailboxID string) (bool, error)
	ListDMARCReports(ctx context.Context, f DMARCReportFilter) ([]*DMARCReport, error)
	// DMARCReport returns one report with its records; ErrNotFound.
	DMARCReport(ctx context.Context, tenant, id string) (*DMARCReport, error)
	// DMARCSources totals the records of the domain's reports whose
	// period ends at or after since, per source IP, most messages first,
	// at most limit.
	DMARCSources(ctx context.Context, tenant, domain string, since time.Time, limit int) ([]DMARCSource, error)
	// DMARCDays totals the same per day.
	DMARCDays(ctx context.Context, tenant, domain string, since time.Time) ([]DMARCDay, error)
}

// DMARCReportsTx changes them.
type DMARCReportsTx interface {
	// SetDMARCInbox marks the mailbox as taking DMARC reports, or not.
	SetDMARCInbox(ctx context.Context, tenant, mailboxID string, on bool) error
	// InsertDMARCReport stores r with its records; inserted is false, and
	// id the first copy's, when the tenant has a report of the same
	// DedupKey (nothing is written).
	InsertDMARCReport(ctx context.Context, r *DMARCReport) (id string, inserted bool, err error)
	// DMARCReportCount is how many reports the tenant keeps.
	DMARCReportCount(ctx context.Context, tenant string) (int, error)
	// DeleteOldestDMARCReports deletes the tenant's n reports that came
	// first (with their records).
	DeleteOldestDMARCReports(ctx context.Context, tenant string, n int) error
}
