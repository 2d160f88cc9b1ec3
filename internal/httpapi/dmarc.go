package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// The DMARC aggregate report routes (docs/api.md, "DMARC reports"):
// reads of what inboxes marked dmarc_reports received, within the key's
// tenant.

type dmarcReportView struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	OrgName          string            `json:"org_name"`
	Email            string            `json:"email"`
	ExtraContactInfo string            `json:"extra_contact_info,omitempty"`
	ReportID         string            `json:"report_id"`
	Domain           string            `json:"domain"`
	Begin            string            `json:"begin"`
	End              string            `json:"end"`
	Policy           core.DMARCPolicy  `json:"policy"`
	Messages         int64             `json:"messages"`
	Pass             int64             `json:"pass"`
	Fail             int64             `json:"fail"`
	RecordCount      int               `json:"record_count"`
	MailboxID        string            `json:"mailbox_id,omitempty"`
	ReceivedAt       string            `json:"received_at"`
	Records          []dmarcRecordView `json:"records,omitempty"`
}

type dmarcRecordView struct {
	SourceIP     string                 `json:"source_ip"`
	Count        int64                  `json:"count"`
	Disposition  string                 `json:"disposition"`
	DKIMAligned  string                 `json:"dkim_aligned"`
	SPFAligned   string                 `json:"spf_aligned"`
	Pass         bool                   `json:"pass"`
	HeaderFrom   string                 `json:"header_from"`
	EnvelopeFrom string                 `json:"envelope_from,omitempty"`
	EnvelopeTo   string                 `json:"envelope_to,omitempty"`
	Reasons      []core.DMARCReason     `json:"reasons"`
	DKIM         []core.DMARCDKIMResult `json:"dkim"`
	SPF          []core.DMARCSPFResult  `json:"spf"`
}

func viewDMARCReport(d *core.DMARCReport) dmarcReportView {
	v := dmarcReportView{ID: d.ID, Object: "dmarc_report", OrgName: d.OrgName, Email: d.Email,
		ExtraContactInfo: d.ExtraContactInfo, ReportID: d.ReportID, Domain: d.Domain, Begin: kit.RFC3339(d.Begin),
		End: kit.RFC3339(d.End), Policy: d.Policy, Messages: d.Messages, Pass: d.Pass, Fail: d.Fail,
		RecordCount: d.RecordCount, MailboxID: d.MailboxID, ReceivedAt: kit.RFC3339(d.ReceivedAt)}
	for _, c := range d.Records {
		rv := dmarcRecordView{SourceIP: c.SourceIP, Count: c.Count, Disposition: c.Disposition, DKIMAligned: c.DKIM,
			SPFAligned: c.SPF, Pass: c.Pass, HeaderFrom: c.HeaderFrom, EnvelopeFrom: c.EnvelopeFrom, EnvelopeTo: c.EnvelopeTo,
			Reasons: c.Reasons, DKIM: c.DKIMResults, SPF: c.SPFResults}
		if rv.Reasons == nil {
			rv.Reasons = []core.DMARCReason{}
		}
		if rv.DKIM == nil {
			rv.DKIM = []core.DMARCDKIMResult{}
		}
		if rv.SPF == nil {
			rv.SPF = []core.DMARCSPFResult{}
		}
		v.Records = append(v.Records, rv)
	}
	return v
}

func (s *Server) handleListDMARCReports(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := kit.ParseLimit(q.Get("limit"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	reps, err := s.Svc.ListDMARCReports(r.Context(), kit.APIKeyFrom(r.Context()), q.Get("domain"), q.Get("after"), limit)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	out := kit.ListView[dmarcReportView]{Object: "list", Data: kit.Views(reps, viewDMARCReport)}
	if len(reps) == limit {
		out.Next = &reps[len(reps)-1].ID
	}
	kit.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetDMARCReport(w http.ResponseWriter, r *http.Request) {
	d, err := s.Svc.DMARCReport(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	v := viewDMARCReport(d)
	if v.Records == nil {
		v.Records = []dmarcRecordView{}
	}
	kit.WriteJSON(w, http.StatusOK, v)
}

type dmarcSourceView struct {
	SourceIP string `json:"source_ip"`
	Messages int64  `json:"messages"`
	Pass     int64  `json:"pass"`
	Fail     int64  `json:"fail"`
	Own      bool   `json:"own"`
}

type dmarcDayView struct {
	Day  string `json:"day"`
	Pass int64  `json:"pass"`
	Fail int64  `json:"fail"`
}

func (s *Server) handleDMARCSummary(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	days := 0
	if v := q.Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > app.MaxDMARCDays {
			kit.WriteError(w, r, s.Logger, core.Errorf(core.CodeValidation, "days", "days must be a whole number from 1 to %d", app.MaxDMARCDays))
			return
		}
		days = n
	}
	sum, err := s.Svc.DMARCSummary(r.Context(), kit.APIKeyFrom(r.Context()), q.Get("domain"), days)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	out := struct {
		Object   string            `json:"object"`
		Domain   string            `json:"domain"`
		Days     int               `json:"days"`
		Since    string            `json:"since"`
		Messages int64             `json:"messages"`
		Pass     int64             `json:"pass"`
		Fail     int64             `json:"fail"`
		Sources  []dmarcSourceView `json:"sources"`
		Daily    []dmarcDayView    `json:"daily"`
	}{Object: "dmarc_summary", Domain: sum.Domain, Days: sum.Days, Since: kit.RFC3339(sum.Since), Messages: sum.Messages,
		Pass: sum.Pass, Fail: sum.Fail, Sources: []dmarcSourceView{}, Daily: []dmarcDayView{}}
	for _, src := range sum.Sources {
		out.Sources = append(out.Sources, dmarcSourceView{SourceIP: src.SourceIP, Messages: src.Messages, Pass: src.Pass,
			Fail: src.Fail, Own: src.Own})
	}
	for _, d := range sum.Daily {
		out.Daily = append(out.Daily, dmarcDayView{Day: d.Day.Format(time.DateOnly), Pass: d.Pass, Fail: d.Fail})
	}
	kit.WriteJSON(w, http.StatusOK, out)
}
