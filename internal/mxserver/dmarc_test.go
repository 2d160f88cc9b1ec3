package mxserver_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// dmarcRow is one record of a test report.
type dmarcRow struct {
	ip        string
	count     int
	dkim, spf string // policy_evaluated
}

// dmarcXML is an aggregate report in Google's shape, its period the day
// before at (fixtures keep no absolute dates).
func dmarcXML(org, email, id, domain string, at time.Time, rows ...dmarcRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8" ?>
<feedback><report_metadata><org_name>%s</org_name><email>%s</email><report_id>%s</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>%s</domain><adkim>r</adkim><aspf>r</aspf><p>none</p><sp>none</sp><pct>100</pct></policy_published>
`, org, email, id, at.Add(-24*time.Hour).Unix(), at.Add(-time.Second).Unix(), domain)
	for _, r := range rows {
		fmt.Fprintf(&b, `<record><row><source_ip>%s</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition>
<dkim>%s</dkim><spf>%s</spf></policy_evaluated></row><identifiers><header_from>%s</header_from></identifiers>
<auth_results><dkim><domain>%s</domain><selector>so1</selector><result>%s</result></dkim>
<spf><domain>%s</domain><result>%s</result></spf></auth_results></record>
`, r.ip, r.count, r.dkim, r.spf, domain, domain, r.dkim, "bounce."+domain, r.spf)
	}
	b.WriteString("</feedback>\n")
	return b.String()
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.Bytes()
}

// reportMail is a report message as reporters send it: a short text and
// the report attached, base64.
func reportMail(to, messageID, filename, contentType string, attachment []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(attachment)
	var lines []string
	for len(enc) > 76 {
		lines, enc = append(lines, enc[:76]), enc[76:]
	}
	lines = append(lines, enc)
	return []byte("From: noreply-dmarc-support@google.test\r\nTo: " + to + "\r\nSubject: Report domain: recv.test\r\n" +
		"Message-ID: <" + messageID + "@google.test>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"R\"\r\n\r\n--R\r\nContent-Type: text/plain\r\n\r\nThis is an aggregate report.\r\n" +
		"--R\r\nContent-Type: " + contentType + "; name=\"" + filename + "\"\r\nContent-Disposition: attachment; filename=\"" + filename + "\"\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n" + strings.Join(lines, "\r\n") + "\r\n--R--\r\n")
}

// createDMARCInbox makes a report address for tenant "default" through
// Resend's POST /inboxes with dmarc_reports: true.
func createDMARCInbox(t *testing.T, env *sendoncetest.Env, address string) string {
	t.Helper()
	env.OwnDomain(t, "default", address)
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/inboxes", Key: env.AdminKey, IdemKey: app.NewID("k"),
		Body: map[string]any{"email_address": address, "dmarc_reports": true}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create dmarc inbox: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["id"].(string)
}

func dmarcReports(t *testing.T, env *sendoncetest.Env, key string) []any {
	t.Helper()
	status, m := get(t, env, key, "/v1/dmarc/reports")
	if status != http.StatusOK {
		t.Fatalf("list dmarc reports: %d", status)
	}
	return m["data"].([]any)
}

func unmatched(t *testing.T, env *sendoncetest.Env) []any {
	t.Helper()
	status, m := get(t, env, env.AdminKey, "/v1/inbound/unmatched")
	if status != http.StatusOK {
		t.Fatalf("list unmatched: %d", status)
	}
	return m["data"].([]any)
}

// TestDMARC_GzipReportOverSMTPIsStoredOnce: a gzip'd report mailed to a
// report address by a real SMTP client is listed with its reporter,
// domain, period and totals, its records read back right; the same
// report delivered again (the reporter lost our 250) is the same report.
func TestDMARC_GzipReportOverSMTPIsStoredOnce(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		inbox := createDMARCInbox(t, env, "dmarc@recv.test")
		if _, m := get(t, env, env.AdminKey, "/inboxes/"+inbox); m == nil || m["dmarc_reports"] != true {
			t.Fatalf("inbox view: %v", m)
		}
		xml := dmarcXML("google.com", "noreply-dmarc-support@google.com", "r-1", "recv.test", env.Clock.Now(),
			dmarcRow{"192.0.2.10", 12, "pass", "pass"}, dmarcRow{"198.51.100.7", 3, "fail", "fail"})
		raw := reportMail("dmarc@recv.test", "rep1", "google.com!recv.test!1!2.xml.gz", "application/gzip", gzipped(t, []byte(xml)))
		var replies []string
		for i := 0; i < 2; i++ {
			reply, err := deliverReply(t, env.InboundAddr, "noreply@google.test", "dmarc@recv.test", raw)
			if err != nil {
				t.Fatalf("delivery %d: %v", i, err)
			}
			replies = append(replies, reply)
		}
		list := dmarcReports(t, env, env.AdminKey)
		if len(list) != 1 {
			t.Fatalf("%d reports listed, want 1: %v", len(list), list)
		}
		rep := list[0].(map[string]any)
		id := rep["id"].(string)
		if !strings.Contains(replies[0], id) || !strings.Contains(replies[1], id) {
			t.Fatalf("the 250s %q do not both name %s", replies, id)
		}
		if rep["org_name"] != "google.com" || rep["domain"] != "recv.test" || rep["report_id"] != "r-1" ||
			rep["messages"] != 15.0 || rep["pass"] != 12.0 || rep["fail"] != 3.0 || rep["begin"] == "" {
			t.Fatalf("report: %v", rep)
		}
		_, full := get(t, env, env.AdminKey, "/v1/dmarc/reports/"+id)
		recs := full["records"].([]any)
		if len(recs) != 2 {
			t.Fatalf("records: %v", recs)
		}
		r0, r1 := recs[0].(map[string]any), recs[1].(map[string]any)
		dkim := r0["dkim"].([]any)[0].(map[string]any)
		spf := r0["spf"].([]any)[0].(map[string]any)
		if r0["source_ip"] != "192.0.2.10" || r0["count"] != 12.0 || r0["disposition"] != "none" || r0["pass"] != true ||
			r0["dkim_aligned"] != "pass" || dkim["result"] != "pass" || dkim["aligned"] != true || spf["domain"] != "bounce.recv.test" ||
			spf["aligned"] != true {
			t.Fatalf("first record: %v", r0)
		}
		if r1["source_ip"] != "198.51.100.7" || r1["pass"] != false || r1["spf_aligned"] != "fail" {
			t.Fatalf("second record: %v", r1)
		}
		if n := len(receivedList(t, env)); n != 0 {
			t.Fatalf("%d received messages: a report is not kept as mail", n)
		}
		if n := env.QueryInt(t, "SELECT count(*) FROM dmarc_records"); n != 2 {
			t.Fatalf("%d records stored, want 2", n)
		}
	})
}

// bombMails are reports whose XML starts well and then grows past the
// XML cap in small tokens: gzip'd (no declared size), or in a zip entry
// declaring a small size; and two messages that carry no report.
func bombMails(t *testing.T, expands int) map[string][]byte {
	t.Helper()
	start := dmarcXML("google.com", "g@google.test", "bomb", "recv.test", time.Now())
	start = start[:strings.Index(start, "</feedback>")]
	xml := start + "<extension>" + strings.Repeat("<x/>"+strings.Repeat(" ", 4000), expands/4004) + "</extension></feedback>"
	var deflated bytes.Buffer
	fw, _ := flate.NewWriter(&deflated, flate.BestSpeed)
	fw.Write([]byte(xml))
	fw.Close()
	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	f, err := zw.CreateRaw(&zip.FileHeader{Name: "report.xml", Method: zip.Deflate,
		CompressedSize64: uint64(deflated.Len()), UncompressedSize64: 4096})
	if err != nil {
		t.Fatal(err)
	}
	f.Write(deflated.Bytes())
	zw.Close()
	return map[string][]byte{
		"zip bomb":      reportMail("dmarc@recv.test", "zipbomb", "report.zip", "application/zip", z.Bytes()),
		"oversized XML": reportMail("dmarc@recv.test", "bigxml", "report.xml.gz", "application/gzip", gzipped(t, []byte(xml))),
		"not a report":  reportMail("dmarc@recv.test", "junk", "report.xml", "text/xml", []byte("<html>hello</html>")),
		"no attachment": []byte("From: a@google.test\r\nTo: dmarc@recv.test\r\nMessage-ID: <plain@google.test>\r\nSubject: hi\r\n\r\nhello\r\n"),
	}
}

// TestDMARC_BombsAndJunkAreKeptUnmatched: a zip bomb, a gzip'd XML
// larger than the cap, junk and a message with no report are each
// answered 250 (the sender must not retry them) and kept as unmatched
// mail with the reason, no report half-stored; the bombs cost memory
// bounded by the XML cap, not by what they expand to.
func TestDMARC_BombsAndJunkAreKeptUnmatched(t *testing.T) {
	const expands = 64 << 20
	mails := bombMails(t, expands)
	sendoncetest.EachEnv(t, sendoncetest.Options{Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		createDMARCInbox(t, env, "dmarc@recv.test")
		for name, raw := range mails {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := deliverFrom(t, env.InboundAddr, "noreply@google.test", "dmarc@recv.test", raw)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatalf("%s: %v, want 250", name, err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 24<<20 {
				t.Fatalf("%s: the session allocated %d MiB; it expands to %d MiB", name, got>>20, expands>>20)
			}
		}
		if list := dmarcReports(t, env, env.AdminKey); len(list) != 0 {
			t.Fatalf("reports stored: %v", list)
		}
		if n := env.QueryInt(t, "SELECT count(*) FROM dmarc_records"); n != 0 {
			t.Fatalf("%d records half-stored", n)
		}
		items := unmatched(t, env)
		if len(items) != 4 {
			t.Fatalf("%d unmatched items, want 4: %v", len(items), items)
		}
		reasons := ""
		for _, it := range items {
			reasons += it.(map[string]any)["reason"].(string) + "\n"
		}
		for _, want := range []string{"larger than the limit", "not an aggregate report", "carries no report"} {
			if !strings.Contains(reasons, want) {
				t.Fatalf("no reason says %q:\n%s", want, reasons)
			}
		}
	})
}

// TestDMARC_TenantScoped: a report about a domain of another tenant,
// mailed to this tenant's report address, is not stored as this tenant's
// report (kept unmatched); and this tenant's reports are another
// tenant's 404.
func TestDMARC_TenantScoped(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		createDMARCInbox(t, env, "dmarc@recv.test")
		env.OwnDomain(t, "other", "someone@other.test")
		_, otherKey := env.NewKey(t, app.NewKeyParams{Name: "other", Tenant: "other", Scopes: []core.Scope{core.ScopeRead, core.ScopeAdmin}})
		now := env.Clock.Now()
		theirs := dmarcXML("Yahoo", "dmarchelp@yahooinc.com", "y-1", "other.test", now, dmarcRow{"192.0.2.1", 1, "pass", "pass"})
		ours := dmarcXML("Yahoo", "dmarchelp@yahooinc.com", "y-2", "mail.recv.test", now, dmarcRow{"192.0.2.1", 1, "pass", "pass"})
		for i, x := range []string{theirs, ours} {
			raw := reportMail("dmarc@recv.test", fmt.Sprint("t", i), "r.xml.gz", "application/gzip", gzipped(t, []byte(x)))
			if err := deliverFrom(t, env.InboundAddr, "dmarc@yahoo.test", "dmarc@recv.test", raw); err != nil {
				t.Fatal(err)
			}
		}
		list := dmarcReports(t, env, env.AdminKey)
		if len(list) != 1 || list[0].(map[string]any)["domain"] != "mail.recv.test" {
			t.Fatalf("this tenant's reports: %v", list)
		}
		if items := unmatched(t, env); len(items) != 1 || !strings.Contains(items[0].(map[string]any)["reason"].(string), "not one of the tenant's domains") {
			t.Fatalf("unmatched: %v", items)
		}
		id := list[0].(map[string]any)["id"].(string)
		if status, _ := get(t, env, otherKey, "/v1/dmarc/reports/"+id); status != http.StatusNotFound {
			t.Fatalf("another tenant's report: %d, want 404", status)
		}
		if l := dmarcReports(t, env, otherKey); len(l) != 0 {
			t.Fatalf("the other tenant lists %v", l)
		}
		if _, m := get(t, env, otherKey, "/v1/dmarc/summary?domain=mail.recv.test&days=7"); len(m["sources"].([]any)) != 0 {
			t.Fatalf("the other tenant's summary: %v", m)
		}
	})
}

// TestDMARC_SummaryPassFailAndOwnSources: per source IP over the last N
// days, pass (DKIM or SPF aligned and passing) and fail, and own: the
// IP is one of --egress-source's; a report older than the window is out.
func TestDMARC_SummaryPassFailAndOwnSources(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{Inbound: true, EgressSources: []string{"out1=192.0.2.10"}}, func(t *testing.T, env *sendoncetest.Env) {
		createDMARCInbox(t, env, "dmarc@recv.test")
		now := env.Clock.Now()
		reports := []string{
			dmarcXML("google.com", "g@google.test", "g-1", "recv.test", now,
				dmarcRow{"192.0.2.10", 10, "pass", "fail"}, dmarcRow{"198.51.100.7", 4, "fail", "fail"}),
			dmarcXML("Enterprise Outlook", "o@outlook.test", "o-1", "recv.test", now,
				dmarcRow{"192.0.2.10", 5, "fail", "pass"}, dmarcRow{"198.51.100.7", 1, "fail", "pass"}),
			dmarcXML("Yahoo", "y@yahoo.test", "y-old", "recv.test", now.Add(-20*24*time.Hour),
				dmarcRow{"203.0.113.9", 100, "fail", "fail"}),
		}
		for i, x := range reports {
			raw := reportMail("dmarc@recv.test", fmt.Sprint("s", i), "r.xml.gz", "application/gzip", gzipped(t, []byte(x)))
			if err := deliverFrom(t, env.InboundAddr, "dmarc@reporter.test", "dmarc@recv.test", raw); err != nil {
				t.Fatal(err)
			}
		}
		_, m := get(t, env, env.AdminKey, "/v1/dmarc/summary?domain=recv.test&days=7")
		if m == nil {
			t.Fatal("summary failed")
		}
		got := map[string]string{}
		for _, s := range m["sources"].([]any) {
			s := s.(map[string]any)
			got[s["source_ip"].(string)] = fmt.Sprint(s["messages"], "/", s["pass"], "/", s["fail"], "/", s["own"])
		}
		want := map[string]string{"192.0.2.10": "15/15/0/true", "198.51.100.7": "5/1/4/false"}
		if fmt.Sprint(got) != fmt.Sprint(want) || m["messages"] != 20.0 || m["pass"] != 16.0 || m["fail"] != 4.0 {
			t.Fatalf("summary over 7 days: %v (sources %v), want %v", m, got, want)
		}
		_, m = get(t, env, env.AdminKey, "/v1/dmarc/summary?domain=recv.test&days=30")
		if n := len(m["sources"].([]any)); n != 3 {
			t.Fatalf("summary over 30 days: %d sources, want 3", n)
		}
		for _, bad := range []string{"?domain=recv.test&days=0", "?domain=recv.test&days=x", "?days=7"} {
			if status, _ := get(t, env, env.AdminKey, "/v1/dmarc/summary"+bad); status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
				t.Fatalf("summary%s: %d, want 4xx", bad, status)
			}
		}
	})
}

// TestDMARC_PatchTurnsReportsOnAndOff: PATCH /inboxes/{id} with
// dmarc_reports makes an existing inbox a report address (its mail is
// read as a report, not kept as a message) and back (mail is kept as
// messages again).
func TestDMARC_PatchTurnsReportsOnAndOff(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		inbox := createInbox(t, env, "reports@recv.test")
		patch := func(on bool) {
			t.Helper()
			r := env.Do(t, sendoncetest.Request{Method: "PATCH", Path: "/inboxes/" + inbox, Key: env.AdminKey,
				Body: map[string]any{"dmarc_reports": on}})
			if r.Status != http.StatusOK {
				t.Fatalf("patch: %d %s", r.Status, r.Body)
			}
			if _, m := get(t, env, env.AdminKey, "/v1/inboxes/"+inbox); m["dmarc_reports"] != on {
				t.Fatalf("after the patch: %v", m)
			}
		}
		deliver := func(id string) {
			t.Helper()
			x := dmarcXML("google.com", "g@google.test", id, "recv.test", env.Clock.Now(), dmarcRow{"192.0.2.1", 1, "pass", "pass"})
			raw := reportMail("reports@recv.test", id, "r.xml.gz", "application/gzip", gzipped(t, []byte(x)))
			if err := deliverFrom(t, env.InboundAddr, "g@google.test", "reports@recv.test", raw); err != nil {
				t.Fatal(err)
			}
		}
		patch(true)
		deliver("p-1")
		patch(false)
		deliver("p-2")
		if l := dmarcReports(t, env, env.AdminKey); len(l) != 1 || l[0].(map[string]any)["report_id"] != "p-1" {
			t.Fatalf("reports: %v", l)
		}
		if n := len(receivedList(t, env)); n != 1 {
			t.Fatalf("%d received messages, want the one sent after dmarc_reports was turned off", n)
		}
	})
}

// TestDMARC_AtTheCapTheOldestGivesWay: past the tenant's cap a new report
// is kept and the oldest dropped with its records, so a flood of reports
// cannot stop the next one; a report mailed again at the cap drops
// nothing, and nothing goes to unmatched mail.
func TestDMARC_AtTheCapTheOldestGivesWay(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{Inbound: true, MaxDMARCReports: 2}, func(t *testing.T, env *sendoncetest.Env) {
		createDMARCInbox(t, env, "dmarc@recv.test")
		deliver := func(id string) {
			t.Helper()
			x := dmarcXML("Yahoo", "dmarchelp@yahooinc.com", id, "recv.test", env.Clock.Now(), dmarcRow{"192.0.2.1", 1, "pass", "pass"})
			raw := reportMail("dmarc@recv.test", id, "r.xml.gz", "application/gzip", gzipped(t, []byte(x)))
			if err := deliverFrom(t, env.InboundAddr, "dmarc@yahoo.test", "dmarc@recv.test", raw); err != nil {
				t.Fatal(err)
			}
			env.Clock.Advance(time.Hour)
		}
		reportIDs := func() []string {
			var ids []string
			for _, r := range dmarcReports(t, env, env.AdminKey) {
				ids = append(ids, r.(map[string]any)["report_id"].(string))
			}
			return ids
		}
		for _, id := range []string{"y-1", "y-2", "y-3"} {
			deliver(id)
		}
		if got := reportIDs(); strings.Join(got, ",") != "y-3,y-2" {
			t.Fatalf("reports kept at a cap of 2: %v, want the newest two", got)
		}
		if n := env.QueryInt(t, "SELECT count(*) FROM dmarc_records"); n != 2 {
			t.Fatalf("%d records stored, want the two kept reports' only", n)
		}
		deliver("y-2") // the reporter lost our 250 and mails it again
		if got := reportIDs(); strings.Join(got, ",") != "y-3,y-2" {
			t.Fatalf("after a report came again: %v", got)
		}
		if items := unmatched(t, env); len(items) != 0 {
			t.Fatalf("unmatched: %v, want none (a report at the cap is kept)", items)
		}
	})
}
