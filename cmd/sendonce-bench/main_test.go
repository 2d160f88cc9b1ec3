package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// The load tool measures what it claims: requests answered 200, counted,
// with ordered percentiles; replays create no new sends.
func TestLoad_NewAndReplay(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	ctx := context.Background()
	c := config{urls: []string{env.URL}, key: env.AdminKey, mode: "new", duration: 300 * time.Millisecond, concurrency: 4, to: "bench@example.com"}
	res, err := load(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// A request under way at the end of the run is waited for and counted.
	sends := env.QueryInt(t, `SELECT count(*) FROM sends`)
	if res.Requests == 0 || res.Errors != 0 || res.Statuses["200"] != res.Requests || sends != res.Requests || res.Sends != sends {
		t.Fatalf("new: %+v, %d sends in the database", res, sends)
	}
	if !(res.P50 > 0 && res.P50 <= res.P99 && res.P99 <= res.P999) {
		t.Fatalf("percentiles out of order: %+v", res)
	}
	c.mode, c.replayKeys = "replay", 5
	res, err = load(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Errors != 0 || res.Duplicates == nil || *res.Duplicates != 0 {
		t.Fatalf("replay: %+v", res)
	}
	if got := env.QueryInt(t, `SELECT count(*) FROM sends`); got != sends+5 {
		t.Fatalf("replay run made %d sends, want only its 5 prepared keys", got-sends)
	}
}

// stormFreshServer runs the storm c sets (its duration, concurrency and
// key counts) against a new server without workers, to
// bench@example.com, and returns its result and the sends the database
// then holds.
func stormFreshServer(t *testing.T, c config) (*result, int) {
	t.Helper()
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	c.urls, c.key, c.to = []string{env.URL}, env.AdminKey, "bench@example.com"
	res, err := storm(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return res, env.QueryInt(t, `SELECT count(*) FROM sends`)
}

// A storm of N keys × K concurrent duplicates makes exactly N sends, and
// the tool's own check (one send per key, looked up over the API) agrees.
func TestStorm_OneSendPerKey(t *testing.T) {
	res, sends := stormFreshServer(t, config{duration: 10 * time.Second, concurrency: 16, stormKeys: 40, stormDupes: 8})
	if res.Requests != 40*8 || res.Errors != 0 || res.Duplicates == nil || *res.Duplicates != 0 || res.Sends != 40 || sends != 40 {
		t.Fatalf("storm: %+v, %d sends in the database", res, sends)
	}
	if res.Statuses["200"]+res.Statuses["409"] != res.Requests || res.Statuses["200"] < 40 {
		t.Fatalf("storm statuses: %v", res.Statuses)
	}
	if !(res.P50 > 0 && res.P50 <= res.P99 && res.P99 <= res.P999) {
		t.Fatalf("percentiles out of order: %+v", res)
	}
}

// The storm stops at its duration, and checks only the keys it stormed.
func TestStorm_BoundedByDuration(t *testing.T) {
	res, sends := stormFreshServer(t, config{duration: 300 * time.Millisecond, concurrency: 8, stormKeys: 1_000_000, stormDupes: 4})
	if res.Sends == 0 || res.Sends != sends || res.Requests != 4*sends || res.Errors != 0 || *res.Duplicates != 0 {
		t.Fatalf("storm: %+v, %d sends in the database", res, sends)
	}
}

// Every accepted send of a delivery run reaches the SMTP server once.
func TestDelivery_EveryAcceptedSendArrives(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	count := func(rcpt string) (n, dups int, last time.Time) {
		ids := map[string]int{}
		for _, m := range env.SMTP.Messages() {
			if slices.Contains(m.To, rcpt) {
				n++
				if ids[m.MessageID]++; ids[m.MessageID] > 1 {
					dups++
				}
			}
		}
		return n, dups, time.Time{}
	}
	c := config{urls: []string{env.URL}, key: env.AdminKey, duration: 300 * time.Millisecond, concurrency: 4, drainWait: 20 * time.Second}
	res, err := delivery(context.Background(), c, count)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sends == 0 || res.Errors != 0 || res.Delivered != res.Sends || *res.Duplicates != 0 || res.DeliveredPerSecond <= 0 {
		t.Fatalf("delivery: %+v", res)
	}
	if got := len(env.SMTP.Messages()); got != res.Sends {
		t.Fatalf("%d messages at the SMTP server, %d accepted sends", got, res.Sends)
	}
}

// The sink answers 250 and counts per recipient, with repeated
// Message-IDs as duplicates.
func TestSink_CountsPerRecipient(t *testing.T) {
	sk, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	defer sk.close()
	for i, id := range []string{"a@x", "b@x", "a@x"} {
		msg := fmt.Sprintf("Message-ID: <%s>\r\nSubject: %d\r\n\r\nhello\r\n", id, i)
		if err := smtp.SendMail(sk.addr, nil, "from@example.com", []string{"Rcpt@Example.com"}, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	n, dups, last := sk.count("rcpt@example.com")
	if n != 3 || dups != 1 || last.IsZero() || sk.messages() != 3 {
		t.Fatalf("count: n=%d dups=%d last=%v total=%d", n, dups, last, sk.messages())
	}
	if n, _, _ := sk.count("other@example.com"); n != 0 {
		t.Fatalf("other recipient: %d", n)
	}
}

// The sink tells, per Message-ID, what it did with each DATA, and counts
// the messages that carried none (the soak's orphans).
func TestSink_StoryAndMessagesWithoutID(t *testing.T) {
	sk, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	defer sk.close()
	for _, msg := range []string{"Message-ID: <s1@x>\r\n\r\nhello\r\n", "Subject: no id\r\n\r\nhello\r\n"} {
		if err := smtp.SendMail(sk.addr, nil, "from@example.com", []string{"r@example.com"}, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	if got := sk.story("s1@x"); !strings.Contains(got, "kept, 250 from 127.0.0.1:") {
		t.Fatalf("story of s1@x = %q", got)
	}
	if got := sk.story("never@x"); got != "no DATA with this Message-ID" {
		t.Fatalf("story of an unseen id = %q", got)
	}
	if n := sk.withoutID(); n != 1 {
		t.Fatalf("withoutID = %d, want 1", n)
	}
}

// --mode all against a running server runs new, replay and storm (delivery
// needs spawned servers), prints one table and writes the rows as JSON.
func TestRun_AllAgainstURL(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	file := filepath.Join(t.TempDir(), "rows.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"--url", env.URL, "--key", env.AdminKey, "--mode", "all", "--duration", "200ms",
		"--concurrency", "4", "--replay-keys", "5", "--storm-keys", "20", "--storm-dupes", "4", "--json", file}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "p999") || !strings.Contains(stderr.String(), "skipping delivery") {
		t.Fatalf("table:\n%s\nstderr: %s", stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rows []result
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Mode)
		if r.Errors != 0 {
			t.Errorf("%s: %d errors: %v", r.Mode, r.Errors, r.Statuses)
		}
	}
	if !slices.Equal(got, []string{"new", "replay", "storm"}) {
		t.Fatalf("rows: %v", got)
	}
}

func TestRun_DeliveryNeedsSpawn(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--mode", "delivery", "--key", "x"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "--spawn-api") {
		t.Fatalf("err = %v", err)
	}
}

// The yardstick answers a JSON POST with JSON and refuses what is not one.
func TestBaselineHandler(t *testing.T) {
	srv := httptest.NewServer(baselineHandler())
	defer srv.Close()
	res, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"to":"a@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !json.Valid(b) || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q %s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	res, err = http.Post(srv.URL, "application/json", strings.NewReader(`{not json`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Fatalf("bad JSON: %d, want 400", res.StatusCode)
	}
}
