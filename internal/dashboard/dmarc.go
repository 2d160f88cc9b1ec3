package dashboard

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// The DMARC page: a domain's aggregate reports over the last days, pass
// and fail per day as the overview's inline SVG bars, the sources and
// the latest reports (docs/deliverability.md, "DMARC aggregate reports").

type dmarcData struct {
	Domain  string
	Days    int
	Choices []int
	Summary *app.DMARCSummary
	Bars    []chartBar
	ChartW  int
	Max     int64
	Reports []*core.DMARCReport
}

var dmarcDayChoices = []int{7, 14, 30, 90}

func (d *Dashboard) dmarc(q *req) error {
	v := q.r.URL.Query()
	data := dmarcData{Domain: v.Get("domain"), Days: app.DefaultDMARCDays, Choices: dmarcDayChoices}
	if n, err := strconv.Atoi(v.Get("days")); err == nil && n >= 1 && n <= app.MaxDMARCDays {
		data.Days = n
	}
	if data.Domain == "" { // the domain of the newest report
		latest, err := d.svc.ListDMARCReports(q.ctx(), q.key, "", "", 1)
		if err != nil {
			return err
		}
		if len(latest) == 0 {
			return d.render(q, 0, "dmarc", "DMARC", data)
		}
		data.Domain = latest[0].Domain
	}
	sum, err := d.svc.DMARCSummary(q.ctx(), q.key, data.Domain, data.Days)
	if err != nil {
		return err
	}
	data.Summary, data.Domain = sum, sum.Domain
	data.Reports, err = d.svc.ListDMARCReports(q.ctx(), q.key, sum.Domain, "", 20)
	if err != nil {
		return err
	}
	data.Bars, data.Max = dmarcBars(sum, d.svc.Now())
	data.ChartW = len(data.Bars) * chartBarWidth
	return d.render(q, 0, "dmarc", "DMARC", data)
}

// dmarcBars is one bar per day of the window, oldest first, pass below
// fail, days without reports empty.
func dmarcBars(sum *app.DMARCSummary, now time.Time) ([]chartBar, int64) {
	byDay := map[string]core.DMARCDay{}
	var top int64 = 1
	for _, d := range sum.Daily {
		byDay[d.Day.Format(time.DateOnly)] = d
		top = max(top, d.Pass+d.Fail)
	}
	today := now.UTC().Truncate(24 * time.Hour)
	out := make([]chartBar, 0, sum.Days)
	for i := sum.Days - 1; i >= 0; i-- {
		day := today.AddDate(0, 0, -i).Format(time.DateOnly)
		c := byDay[day]
		out = append(out, stackedBar((sum.Days-1-i)*chartBarWidth, fmt.Sprintf("%s: %d passed, %d failed", day, c.Pass, c.Fail),
			top, chartPart{"sent", c.Pass}, chartPart{"failed", c.Fail}))
	}
	return out, top
}
