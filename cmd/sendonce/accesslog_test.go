package main_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServe_AccessLogLines: the served binary writes one line per request
// in the log's format (text or JSON), as slog would, with the route, the
// status, the key's fingerprint and whether the answer was a replay —
// never the key's secret.
func TestServe_AccessLogLines(t *testing.T) {
	binaryTest(t)
	textLine := regexp.MustCompile(`^time=\S+ level=INFO msg=request method=POST route="POST /v1/send" path=/v1/send status=200 duration=\S+ key=(\S+) replayed=(true|false)$`)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			db := sqliteDB(t)
			secret := createKey(t, db, "log", "send,read")
			p := startServe(t, "--db", db, "--transport", "capture", "--log-format", format)
			for range 2 {
				if code := postSend(t, p.url, secret, "log-1", `{"to":"a@example.com","subject":"s","text":"t"}`); code != http.StatusOK {
					t.Fatalf("send: %d", code)
				}
			}
			var replayed []bool
			deadline := time.Now().Add(10 * time.Second)
			for len(replayed) < 2 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond) // the log buffer is flushed every 100 ms
				replayed = replayed[:0]
				for _, line := range strings.Split(p.logText(), "\n") {
					if r, ok := sendLine(t, format, textLine, line); ok {
						replayed = append(replayed, r)
					}
				}
			}
			if len(replayed) != 2 || replayed[0] || !replayed[1] {
				t.Fatalf("request lines for the two sends say replayed %v, want [false true]; log:\n%s", replayed, p.logText())
			}
			if strings.Contains(p.logText(), secret) || strings.Contains(p.logText(), strings.Split(secret, "_")[2]) {
				t.Fatal("the access log shows the key's secret")
			}
		})
	}
}

// sendLine parses an access line of POST /v1/send in format: whether it
// is one, and its replayed field.
func sendLine(t *testing.T, format string, textLine *regexp.Regexp, line string) (replayed, ok bool) {
	t.Helper()
	if format == "text" {
		if !strings.Contains(line, "msg=request") {
			return false, false
		}
		m := textLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("access line %q is not in slog's text form", line)
		}
		return m[2] == "true", m[1] != ""
	}
	var l struct {
		Msg, Level, Method, Route, Path, Key string
		Status, Duration                     int64
		Replayed                             bool
	}
	if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "request" {
		return false, false
	}
	if l.Level != "INFO" || l.Method != "POST" || l.Route != "POST /v1/send" || l.Path != "/v1/send" || l.Status != 200 || l.Duration <= 0 || l.Key == "" {
		t.Fatalf("access line %q lacks a field", line)
	}
	return l.Replayed, true
}

func postSend(t *testing.T, url, secret, key, body string) int {
	t.Helper()
	status, _ := apiCall(t, "POST", url+"/v1/send", secret, key, body)
	return status
}
