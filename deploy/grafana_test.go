package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

type grafanaPanel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

// TestGrafanaDashboard_EveryExpressionNamesServedMetrics: every metric the
// dashboard's expressions select is one a running server (on PostgreSQL,
// for the pool's figures) exposes on /metrics after one send, and the
// section 8 metrics each have a panel.
func TestGrafanaDashboard_EveryExpressionNamesServedMetrics(t *testing.T) {
	b, err := os.ReadFile("grafana/sendonce.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string         `json:"uid"`
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil || dash.UID == "" {
		t.Fatalf("the dashboard: %v (uid %q)", err, dash.UID)
	}
	used := map[string][]string{} // metric → panel titles
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 || p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: no query, or not on the dashboard's datasource variable", p.Title)
			}
			for _, tg := range p.Targets {
				names, err := promqlMetrics(tg.Expr)
				if err != nil || len(names) == 0 {
					t.Errorf("panel %q: %q: %v", p.Title, tg.Expr, err)
				}
				for _, n := range names {
					used[n] = append(used[n], p.Title)
				}
			}
		}
	}
	walk(dash.Panels)

	served := scrapeAfterASend(t)
	for name, panels := range used {
		if !served[name] {
			t.Errorf("panels %q select %s, which the server does not expose", panels, name)
		}
	}
	for _, m := range []string{"sendonce_sends_accepted_total", "sendonce_idempotent_replays_total",
		"sendonce_idempotency_conflicts_total", "sendonce_delivery_attempts_total", "sendonce_queue_depth"} {
		if used[m] == nil {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// scrapeAfterASend starts a real server on PostgreSQL, sends one mail,
// waits for its delivery, and returns the metric names /metrics shows.
func scrapeAfterASend(t *testing.T) map[string]bool {
	t.Helper()
	env := sendoncetest.Start(t, sendoncetest.Options{Backend: sendoncetest.Postgres})
	req, _ := http.NewRequest("POST", env.URL+"/v1/send", strings.NewReader(`{"to":"ada@example.com","from":"me@example.com","subject":"Hi","text":"Hello"}`))
	req.Header.Set("Authorization", "Bearer "+env.AdminKey)
	req.Header.Set("Idempotency-Key", "grafana-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		t.Fatalf("send: %s %s", resp.Status, body)
	}
	var metrics []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(env.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(metrics, []byte(`sendonce_delivery_attempts_total{outcome="sent"} 1`)) {
			break
		}
	}
	served := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		served[l[:strings.IndexAny(l, "{ ")]] = true
	}
	if !served["sendonce_sends_accepted_total"] {
		t.Fatalf("/metrics:\n%s", metrics)
	}
	return served
}

// promqlMetrics returns the metric names a PromQL expression selects:
// the identifiers outside label matchers, ranges and strings that are not
// a function call, an aggregation, a keyword, or a label list of by/without/on/ignoring/
// group_left/group_right. The expressions stay within this subset (the
// test fails on what it cannot read); Prometheus's own parser would bring
// the Prometheus server's module graph for this.
func promqlMetrics(expr string) ([]string, error) {
	keywords := []string{"sum", "avg", "min", "max", "count", "group", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values", "limitk", "limit_ratio", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless", "inf", "nan"}
	labelLists := []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	var names []string
	skipList := false
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '{' || c == '[' || c == '"' || c == '\'' || c == '`':
			end := map[byte]byte{'{': '}', '[': ']', '"': '"', '\'': '\'', '`': '`'}[c]
			j := strings.IndexByte(expr[i+1:], end)
			if j < 0 {
				return nil, errUnclosed(c)
			}
			i += j + 2
		case c == '(' && skipList:
			j := strings.IndexByte(expr[i:], ')')
			if j < 0 {
				return nil, errUnclosed(c)
			}
			i += j + 1
			skipList = false
		case c >= '0' && c <= '9': // a number or a duration (5m, 1e3)
			for i < len(expr) && (expr[i] == '.' || (expr[i] >= '0' && expr[i] <= '9') || (expr[i]|0x20 >= 'a' && expr[i]|0x20 <= 'z')) {
				i++
			}
		case c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z'):
			j := i
			for j < len(expr) && (expr[j] == '_' || expr[j] == ':' || (expr[j]|0x20 >= 'a' && expr[j]|0x20 <= 'z') || (expr[j] >= '0' && expr[j] <= '9')) {
				j++
			}
			word := expr[i:j]
			i = j
			rest := strings.TrimLeft(expr[j:], " ")
			switch {
			case slices.Contains(labelLists, word):
				skipList = true
			case slices.Contains(keywords, word), strings.HasPrefix(rest, "("):
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	return names, nil
}

type errUnclosed byte

func (e errUnclosed) Error() string { return "unclosed " + string(rune(e)) }

func TestPromqlMetrics_ReadsSelectorsOnly(t *testing.T) {
	got, err := promqlMetrics(`histogram_quantile(0.99, sum by (le) (rate(a_bucket{x="y", z=~"5.."}[$__rate_interval]))) / on (pool) max without (instance) (b) + c offset 5m`)
	if want := []string{"a_bucket", "b", "c"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}
