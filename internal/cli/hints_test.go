package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every `sendonce keys create …` command the dashboard's pages suggest
// runs as written: a hint that fails (one once lacked --name) leaves a new
// user at the sign-in page with no key.
func TestDashboardHints_KeyCommandsRun(t *testing.T) {
	pages, err := filepath.Glob("../dashboard/templates/*.html")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no dashboard templates (%v)", err)
	}
	code := regexp.MustCompile(`<code>(?:go run \./cmd/sendonce|sendonce) (keys create[^<]*)</code>`)
	ran := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range code.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(m[1], "…") {
				continue // a fragment, not a command
			}
			args := append(strings.Fields(m[1]), "--db", sqliteDSN(t))
			if r := runCLI(t, nil, args...); r.err != nil || !strings.HasPrefix(r.stdout, "so_") {
				t.Errorf("%s suggests `sendonce %s`: %v %s", filepath.Base(page), m[1], r.err, r.stderr)
			}
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("no key command found in the dashboard's pages")
	}
}
