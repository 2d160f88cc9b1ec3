package dashboard_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDashboard_ThreadPageIsPagedAndCutsLargeBodies: a thread of 22
// messages of 300 KiB each shows 20 on its page, each body cut (the page
// is far smaller than the thread), and the rest behind "Later messages".
func TestDashboard_ThreadPageIsPagedAndCutsLargeBodies(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		inbox := env.NewInbox(t, "default", "desk@big.test", "Desk")
		body := strings.Repeat("abcdefgh ", 300<<10/9)
		var thread string
		for i := range 22 {
			refs := ""
			if i > 0 {
				refs = "References: <p0@stranger.test>\r\n"
			}
			raw := fmt.Sprintf("From: s@stranger.test\r\nTo: desk@big.test\r\nSubject: Big\r\nMessage-ID: <p%d@stranger.test>\r\n%s\r\n%s\r\n", i, refs, body)
			r := env.Receive(t, inbox, raw)
			thread = r.ThreadID
		}
		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		p := br.get("/ui/mail/" + thread)
		if p.Status != http.StatusOK {
			t.Fatalf("thread page: %d", p.Status)
		}
		if n := strings.Count(p.Body, `id="msg-`); n != 20 {
			t.Fatalf("the first page shows %d messages, want 20", n)
		}
		if strings.Count(p.Body, "cut here") != 20 || len(p.Body) > 20*(260<<10)+(64<<10) {
			t.Fatalf("the page (%d bytes) does not cut its 300 KiB bodies", len(p.Body))
		}
		i := strings.Index(p.Body, `/ui/mail/`+thread+`?after=`)
		if i < 0 {
			t.Fatal("the first page has no link to the later messages")
		}
		link := p.Body[i : i+strings.IndexByte(p.Body[i:], '"')]
		p = br.get(strings.ReplaceAll(link, "&amp;", "&"))
		if n := strings.Count(p.Body, `id="msg-`); p.Status != http.StatusOK || n != 2 || strings.Contains(p.Body, "?after=") {
			t.Fatalf("the second page (%d) shows %d messages, want the last 2 and no further link", p.Status, n)
		}
	})
}
