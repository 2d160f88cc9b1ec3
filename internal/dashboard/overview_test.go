package dashboard_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestOverview_DuplicatesPrevented replays one send twice through the API:
// the metric counts two replays, not the first request, and the overview
// prices them.
func TestOverview_DuplicatesPrevented(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{Clock: clockInsideOneDay()}, func(t *testing.T, env *sendoncetest.Env) {
		today := env.Clock.Now().UTC().Format("2006-01-02")
		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		if p := br.get("/"); !strings.Contains(p.Body, "No sends yet") || !strings.Contains(p.Body, "curl -X POST") {
			t.Errorf("the empty overview does not say what to do next")
		} else if strings.Contains(p.Body, `<meter min="0"`) || strings.Count(p.Body, `<rect class="slot"`) != 14 {
			t.Errorf("day one shows rows of zeros (%d meters) instead of a chart of 14 days (%d bars)",
				strings.Count(p.Body, "<meter"), strings.Count(p.Body, `<rect class="slot"`))
		}
		body := map[string]any{"to": []string{"a@example.net"}, "subject": "once", "text": "x"}
		for i := range 3 {
			r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: env.AdminKey, IdemKey: "same-key", Body: body})
			if r.Status != http.StatusOK {
				t.Fatalf("send %d: %d %s", i, r.Status, r.Body)
			}
		}
		res, err := http.Get(env.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for _, want := range []string{`sendonce_duplicates_prevented_total{via="replay"} 2`, `sendonce_duplicates_prevented_total{via="conflict"} 0`} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		// One more send, then made unknown: the chart counts both sends
		// on today's row, the tile the unknown one.
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: env.AdminKey, IdemKey: "other-key", Body: body})
		id, _ := r.JSON(t)["id"].(string)
		env.Exec(t, "UPDATE sends SET status = 'unknown' WHERE id = ?", id)
		p := br.get("/")
		at := strings.Index(p.Body, `<th scope="row">`+today)
		if at < 0 {
			t.Fatalf("the chart has no row for today, %s:\n%s", today, p.Body)
		}
		row, _, _ := strings.Cut(p.Body[at:], "</tr>")
		if !strings.Contains(row, `value="2"></meter> 2`) || !strings.Contains(row, "<td>1</td>") {
			t.Errorf("today's row of the chart is %q, want 2 accepted, 1 unknown", row)
		}
		if !regexp.MustCompile(`<title>`+today+`: 2 accepted, [01] sent, 0 failed, 1 unknown</title>`).MatchString(p.Body) ||
			!strings.Contains(p.Body, `<rect class="unknown"`) {
			t.Errorf("the chart has no bar for today's 2 sends, 1 unknown")
		}
		if n := strings.Count(p.Body, `<meter min="0"`); n != 1 {
			t.Errorf("the table has %d rows, want only today's", n)
		}
		if !strings.Contains(p.Body, "<b>1</b> in unknown") {
			t.Errorf("the overview does not count the unknown send")
		}
		for _, want := range []string{"replay: 2", "Amazon SES", "$0.0002", "Postmark", "$0.0024–0.0036"} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("the overview lacks %q", want)
			}
		}
	})
}

// clockInsideOneDay is a clock at least ten minutes before the end of its
// UTC day, moved past midnight when the test starts closer to it: the
// chart counts by UTC day, and the test's sends must all fall on the day
// it reads.
func clockInsideOneDay() *sendoncetest.Clock {
	c := &sendoncetest.Clock{}
	now := c.Now().UTC()
	if left := now.Truncate(24 * time.Hour).Add(24 * time.Hour).Sub(now); left < 10*time.Minute {
		c.Advance(left + time.Minute)
	}
	return c
}
