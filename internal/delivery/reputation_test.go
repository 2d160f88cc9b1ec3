package delivery_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// The reputation guard end to end: bulk mail handed to a real relay,
// complaints and bounces recorded through the report use case the
// inbound listener calls, the claim that then leaves the tenant's bulk
// mail queued, and the resume that lets it go.

// repThresholds are small enough for a test to cross: one complaint in
// ten sends is 0.1.
var repThresholds = app.ReputationThresholds{ComplaintRate: 0.1, BounceRate: 0.2, MinSends: 10}

// arfFor is a feedback report about a single-recipient send, without the
// returned message's Message-ID (the report names the recipient).
func arfFor(rcpt string) []byte {
	return []byte("From: fbl@isp.test\r\nTo: bounces@example.test\r\nSubject: complaint\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/report; report-type=feedback-report; boundary=\"F\"\r\n\r\n" +
		"--F\r\nContent-Type: text/plain\r\n\r\nA complaint.\r\n" +
		"--F\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\nUser-Agent: FBL/1\r\nVersion: 1\r\nOriginal-Rcpt-To: <" + rcpt + ">\r\n" +
		"--F--\r\n")
}

// dsnFor is a delivery status notification: rcpt's mailbox does not exist.
func dsnFor(rcpt string) []byte {
	return []byte("From: MAILER-DAEMON@mx.test\r\nTo: bounces@example.test\r\nSubject: Undelivered\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/report; report-type=delivery-status; boundary=\"D\"\r\n\r\n" +
		"--D\r\nContent-Type: text/plain\r\n\r\nThe mail could not be delivered.\r\n" +
		"--D\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.test\r\n\r\n" +
		"Final-Recipient: rfc822; " + rcpt + "\r\nAction: failed\r\nStatus: 5.1.1\r\nDiagnostic-Code: smtp; 550 5.1.1 no such user\r\n" +
		"--D--\r\n")
}

// report hands a report about send id to the bounce intake use case.
func report(t *testing.T, env *sendoncetest.Env, id string, raw []byte) {
	t.Helper()
	res, err := env.Server.Service.RecordBounceReport(context.Background(), app.BounceReport{SendID: id, Bound: -1, Raw: raw})
	if err != nil || res != app.ReportRecorded {
		t.Fatalf("record report about %s: %v %v, want recorded", id, res, err)
	}
}

// sendBulk accepts n bulk sends (one recipient each) and waits until the
// relay took them all; it returns their ids and recipients.
func sendBulk(t *testing.T, env *sendoncetest.Env, prefix string, n int) (ids, rcpts []string) {
	t.Helper()
	return sendBulkFrom(t, env, prefix, "", n)
}

// sendBulkFrom is sendBulk from the address from ("": the mailbox's).
func sendBulkFrom(t *testing.T, env *sendoncetest.Env, prefix, from string, n int) (ids, rcpts []string) {
	t.Helper()
	for i := range n {
		rcpt := fmt.Sprintf("%s-%d@example.com", prefix, i)
		body := map[string]any{"to": rcpt, "subject": "news", "text": "x", "stream": "bulk"}
		if from != "" {
			body["from"] = from
		}
		r := env.Send(t, prefix+fmt.Sprint(i), body)
		if r.Status != http.StatusOK {
			t.Fatalf("bulk send: %d %s", r.Status, r.Body)
		}
		ids, rcpts = append(ids, r.JSON(t)["id"].(string)), append(rcpts, rcpt)
	}
	for _, id := range ids {
		env.WaitStatus(t, id, waitLong, core.StatusSent)
	}
	return ids, rcpts
}

func reputationOf(t *testing.T, env *sendoncetest.Env) map[string]any {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/reputation", Key: env.AdminKey})
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/reputation: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)
}

// TestReputation_PausesBulkKeepsItQueuedAndResumes: ten bulk sends
// handed to the relay, then one complaint (a rate of 0.1, the
// threshold) pauses the tenant's bulk stream at once. A bulk send
// accepted then stays queued while a transactional send to the same
// relay is delivered; POST /v1/reputation/resume lets the bulk send go.
// A permanent bounce rate pauses the same way.
func TestReputation_PausesBulkKeepsItQueuedAndResumes(t *testing.T) {
	for _, kind := range []string{"complaint", "bounce"} {
		t.Run(kind, func(t *testing.T) {
			sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
				env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, Reputation: repThresholds})
				ids, rcpts := sendBulk(t, env, "n", 10)
				if kind == "complaint" {
					report(t, env, ids[0], arfFor(rcpts[0]))
				} else {
					report(t, env, ids[0], dsnFor(rcpts[0]))
					report(t, env, ids[1], dsnFor(rcpts[1]))
				}
				rep := reputationOf(t, env)
				if rep["state"] != "paused" || rep["window_sends"] != float64(10) {
					t.Fatalf("after the %s: %v, want paused with 10 sends in the window", kind, rep)
				}

				m := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/metrics"})
				for series, want := range map[string]string{
					`sendonce_reputation_paused{tenant="default"}`:         "1",
					`sendonce_reputation_complaint_rate{tenant="default"}`: map[string]string{"complaint": "0.1", "bounce": "0"}[kind],
					`sendonce_reputation_bounce_rate{tenant="default"}`:    map[string]string{"complaint": "0", "bounce": "0.2"}[kind],
				} {
					if !strings.Contains(string(m.Body), "\n"+series+" "+want+"\n") {
						t.Errorf("/metrics has no %s %s", series, want)
					}
				}

				bulk := env.Send(t, "later-bulk", map[string]any{"to": "later@example.com", "subject": "news", "text": "x", "stream": "bulk"}).JSON(t)["id"].(string)
				tx := env.Send(t, "reset", map[string]any{"to": "later@example.com", "subject": "reset", "text": "x"}).JSON(t)["id"].(string)
				env.WaitStatus(t, tx, waitLong, core.StatusSent)
				time.Sleep(300 * time.Millisecond) // some fifteen polls of the workers
				if st := getSend(t, env, bulk)["status"]; st != string(core.StatusQueued) {
					t.Fatalf("the paused tenant's bulk send is %v, want queued (not attempted)", st)
				}
				if n := env.QueryInt(t, `SELECT tries FROM sends WHERE id = ?`, bulk); n != 0 {
					t.Errorf("the paused bulk send was claimed %d times, want none", n)
				}
				for _, m := range env.SMTP.Messages() {
					if strings.Contains(string(m.Data), "Subject: news") && m.To[0] == "later@example.com" {
						t.Fatalf("the relay got the paused bulk send")
					}
				}

				r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/reputation/resume", Key: env.AdminKey, IdemKey: "resume-1"})
				if r.Status != http.StatusOK || r.JSON(t)["state"] != "active" {
					t.Fatalf("resume: %d %s, want 200 and active", r.Status, r.Body)
				}
				env.WaitStatus(t, bulk, waitLong, core.StatusSent)
			})
		})
	}
}

// TestReputation_OneDomainsRatesPause: a tenant sends bulk mail from two
// domains, 30 from example.com and 10 from shop.example. One complaint
// about shop.example's mail is 0.025 of the tenant's mail, under the
// threshold of 0.1, but 0.1 of shop.example's: the stream pauses, and
// GET /v1/reputation shows each domain's rates. The same complaint about
// example.com's mail (1 in 30) pauses nothing.
func TestReputation_OneDomainsRatesPause(t *testing.T) {
	for _, about := range []string{"shop.example", "example.com"} {
		t.Run(about, func(t *testing.T) {
			sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
				env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, Reputation: repThresholds})
				ids, rcpts := sendBulk(t, env, "main", 30)
				shopIDs, shopRcpts := sendBulkFrom(t, env, "shop", `"Shop" <News@Shop.Example>`, 10)
				if about == "shop.example" {
					ids, rcpts = shopIDs, shopRcpts
				}
				report(t, env, ids[0], arfFor(rcpts[0]))
				rep := reputationOf(t, env)
				want := map[string]string{"shop.example": "paused", "example.com": "active"}[about]
				if rep["state"] != want || rep["complaint_rate"] != 0.025 || rep["window_sends"] != float64(40) {
					t.Fatalf("one complaint about %s's mail: %v, want %s at 0.025 of 40 sends", about, rep, want)
				}
				doms, _ := rep["domains"].([]any)
				if len(doms) != 2 {
					t.Fatalf("domains: %v, want example.com and shop.example", rep["domains"])
				}
				shop := doms[1].(map[string]any)
				wantShop := map[string]float64{"shop.example": 0.1, "example.com": 0}[about]
				if shop["domain"] != "shop.example" || shop["window_sends"] != float64(10) || shop["complaint_rate"] != wantShop {
					t.Errorf("shop.example's rates: %v, want %v of 10 sends", shop, wantShop)
				}
			})
		})
	}
}

// TestReputation_BelowMinSendsNoPause: a complaint rate far over the
// threshold pauses nothing while the window holds fewer sends than
// --pause-min-sends; the next bulk send goes.
func TestReputation_BelowMinSendsNoPause(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, Reputation: repThresholds})
		ids, rcpts := sendBulk(t, env, "few", 5)
		report(t, env, ids[0], arfFor(rcpts[0]))
		report(t, env, ids[1], arfFor(rcpts[1]))
		rep := reputationOf(t, env)
		if rep["state"] != "active" || rep["complaint_rate"] != 0.4 || rep["window_sends"] != float64(5) {
			t.Fatalf("2 complaints in 5 sends under a minimum of 10: %v, want active at 0.4", rep)
		}
		id := env.Send(t, "next", map[string]any{"to": "next@example.com", "subject": "news", "text": "x", "stream": "bulk"}).JSON(t)["id"].(string)
		env.WaitStatus(t, id, waitLong, core.StatusSent)
	})
}
