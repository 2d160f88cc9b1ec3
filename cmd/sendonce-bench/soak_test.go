package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// soakCIDuration is how long CI runs the soak per database, with a fixed
// seed each; docs/reliability-journal.md records longer runs.
const soakCIDuration = 60 * time.Second

// soakCIFloors is the least a CI soak must do, per database, to pass: a
// soak whose clients were never answered 200 checked nothing. Measured on
// this project's 2-core machine under `go test -race` (the processes
// race-enabled too) with other work running, load average 11–21: SQLite
// 1,852–2,483 acknowledged, 1,807–2,401 at the sink; PostgreSQL
// 3,743–4,645 acknowledged, 3,498–4,378 at the sink; the seeds' schedules
// hold 16 (SQLite) and 17 (PostgreSQL) faults, all applied. The send
// floors are under a tenth of the lowest, so that a CI machine several
// times slower still clears them and only a soak that mostly stood still
// fails; the fault floor is half the schedule, since only faults pushed
// past the end by slow restarts go missing. The receiving leg accepted
// 110–240 messages in 10–25 s runs (not race-enabled, quiet): 20 in a
// minute is far below what it does. The mx leg (a send every 125 ms at
// most) delivered 140–216 recipients and the webhook leg 285–479 events
// in 30 s runs (not race-enabled, with a 30-minute soak beside them):
// 20 of each in a minute asks only that the legs ran.
var soakCIFloors = soakFloors{Acked: 100, AtSink: 100, Faults: 8, Received: 20, MXDelivered: 20, WebhookEvents: 20}

// The randomized fault soak, run on real sendonce processes: SQLite (one
// process) and PostgreSQL (two API and two worker processes), 60 s of
// seeded faults each, with the mx leg (shaped destinations that defer)
// and the webhook leg (an endpoint that fails and recovers), then the
// checks (see soak_check.go, soak_mx_check.go, soak_webhook_check.go). A violation
// fails the test with the offending histories, and so does a soak that
// did less than soakCIFloors. Under -race the processes are race-enabled
// too, and a race they report is a violation.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sendonce processes under faults for a minute")
	}
	bin := buildSendonce(t)
	for _, c := range []struct {
		name string
		seed uint64
	}{{"sqlite", 15}, {"postgres", 16}} {
		t.Run(c.name, func(t *testing.T) {
			dir := keptOnFailure(t, "sendonce-soak-"+c.name+"-")
			db := "sqlite:" + filepath.Join(dir, "soak.db")
			if c.name == "postgres" {
				db = pgtest.URL(t) // the soak creates (and drops) a database of its own
			}
			t.Parallel()
			sc := soakConfig{bin: bin, db: db, duration: soakCIDuration, seed: c.seed, clients: 4, apis: 2, workers: 2,
				dir: dir, lease: 3 * time.Second, settle: 3 * time.Minute, giveUp: 30 * time.Second, floors: soakCIFloors,
				mx: true, hooks: true, hookDrain: 90 * time.Second}
			runCleanSoak(t, sc, "received-twice=0 received-lost=0 past-shaping=0 webhook-lost=0 webhook-mismatch=0")
		})
	}
}

// runCleanSoak runs the soak sc and fails the test unless it ends without
// error and its violations line says no duplicate, lost or stuck send,
// nor any other count the soak's legs name in clean (each a run of the
// line's "name=0" fields).
func runCleanSoak(t *testing.T, sc soakConfig, clean ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	err := runSoak(context.Background(), sc, "", &stdout, &stderr)
	t.Logf("soak took %s\n%s", time.Since(start).Round(time.Second), stdout.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(stderr.String(), 40))
	}
	for _, want := range append([]string{"violations: duplicates=0 lost=0 stuck=0"}, clean...) {
		if !strings.Contains(stdout.String(), want) {
			t.Fatalf("no clean violations line:\n%s", stdout.String())
		}
	}
}

// buildSendonce builds the sendonce binary for a soak, race-enabled when
// the test is.
func buildSendonce(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sendonce")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../sendonce")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build sendonce: %v", err)
	}
	return bin
}

// keptOnFailure is a new temporary directory, removed after a test that
// passed and kept (its path logged) after one that failed: the processes'
// logs are what a failure is chased with.
func keptOnFailure(t *testing.T, prefix string) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the soak's logs are kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// The checks have teeth: each kind of violation a soak can meet is
// counted, and the unknown sends are sorted by what reached the sink.
func TestSoakJudge_CountsEveryViolation(t *testing.T) {
	acked := func(key, id string) *logical {
		return &logical{key: key, sendID: id, bodies: []string{`{"id":"` + id + `"}`}}
	}
	ids := map[string]int{"m-sent": 1, "m-twice": 2, "m-unk1": 1, "m-unk2": 2, "m-failed": 1}
	began := map[string]int{"m-sent": 1, "m-twice": 2, "m-unk1": 1, "m-unk2": 2, "m-failed": 1, "m-hung": 1}
	cases := []struct {
		l     *logical
		sends []soakSend
	}{
		{acked("ok", "s1"), []soakSend{{ID: "s1", Status: "sent", MessageID: "<m-sent>"}}},
		{acked("lost", "s2"), nil},
		{acked("dup", "s3"), []soakSend{{ID: "s3", Status: "sent", MessageID: "<m-a>"}, {ID: "s4", Status: "queued", MessageID: "<m-b>"}}},
		{acked("twice", "s5"), []soakSend{{ID: "s5", Status: "sent", MessageID: "<m-twice>"}}},
		{acked("stuck", "s6"), []soakSend{{ID: "s6", Status: "sending", MessageID: "<m-c>"}}},
		{acked("unk0", "s7"), []soakSend{{ID: "s7", Status: "unknown", MessageID: "<m-unk0>"}}},
		{acked("hung", "s13"), []soakSend{{ID: "s13", Status: "unknown", MessageID: "<m-hung>"}}},
		{acked("unk1", "s8"), []soakSend{{ID: "s8", Status: "unknown", MessageID: "<m-unk1>"}}},
		{acked("unk2", "s9"), []soakSend{{ID: "s9", Status: "unknown", MessageID: "<m-unk2>"}}},
		{acked("failed", "s10"), []soakSend{{ID: "s10", Status: "failed", MessageID: "<m-failed>"}}},
		{acked("other-id", "s11"), []soakSend{{ID: "s12", Status: "failed", MessageID: "<m-d>"}}},
		{&logical{key: "unacked"}, nil},
	}
	rep := &soakReport{Statuses: map[string]int{}}
	seen := map[string]bool{}
	for _, c := range cases {
		judge(c.l, c.sends, sinkView{ids: ids, began: began}, seen, rep, func(string, *logical, string) {})
	}
	got := [...]int{rep.Acked, rep.Lost, rep.Duplicates, rep.Stuck, rep.SentNotAt, rep.Other,
		rep.UnknownNeverLeft, rep.UnknownLostAfterData, rep.UnknownAtSink, rep.UnknownTwice}
	// dup: 1 extra send and its sent send not at the sink (m-a); twice: 1;
	// stuck: s4 (queued) and s6; other: failed-at-sink and the wrong id.
	want := [...]int{11, 1, 2, 2, 1, 2, 1, 1, 1, 1}
	if got != want {
		t.Fatalf("acked, lost, duplicates, stuck, sent-not-at-sink, other, unknown never-at-DATA/hung-up/kept/twice = %v, want %v", got, want)
	}
}

// Messages at the sink that belong to no send are violations, those
// without a Message-ID among them (they would otherwise vanish from the
// tally and make a sent send look undelivered).
func TestSoakOrphans_CountMessagesWithoutID(t *testing.T) {
	rep := &soakReport{}
	k := &soakChecker{rep: rep, seen: map[string]bool{"m-1": true},
		sink: sinkView{ids: map[string]int{"m-1": 1, "m-stray": 2}}}
	k.countOrphans(3)
	if rep.Other != 4 || len(rep.Findings) != 2 {
		t.Fatalf("other = %d, findings %q; want 3 without an id + 1 stray Message-ID", rep.Other, rep.Findings)
	}
}

// A seed names one schedule of faults, whatever else draws meanwhile:
// the schedule is drawn up front from a stream of its own, its faults in
// order, apart and within the duration.
func TestSoakSchedule_OneSeedOneSchedule(t *testing.T) {
	kinds := faultKinds(true)
	a := drawSchedule(newStream(16, "schedule"), kinds, 4, 3*time.Second, time.Minute)
	other := newStream(16, "sink")
	for range 100 {
		other.intN(1000) // another consumer's draws change nothing
	}
	b := drawSchedule(newStream(16, "schedule"), kinds, 4, 3*time.Second, time.Minute)
	c := drawSchedule(newStream(17, "schedule"), kinds, 4, 3*time.Second, time.Minute)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Fatalf("seed 16 twice: %v and %v; seed 17: %v", a, b, c)
	}
	if len(a) < 8 {
		t.Fatalf("%d faults in a minute, want more", len(a))
	}
	end := time.Duration(0)
	for i, e := range a {
		if e.at < end+500*time.Millisecond || e.at >= time.Minute || e.node < 0 || e.node >= 4 {
			t.Fatalf("fault %d %+v: begins before the one before has ended (%s) and a pause, or out of bounds", i, e, end)
		}
		end = e.at + e.hold
	}
}

// A soak in which too little happened fails, saying what fell short.
func TestSoakFloors_AnIdleSoakFails(t *testing.T) {
	c := soakConfig{seed: 7, dir: t.TempDir(), floors: soakFloors{Acked: 10, AtSink: 10, Faults: 2}}
	idle := &soakReport{Keys: 40, Acked: 0, AtSink: 3, Faults: map[string]int{faultKill: 2}, Requests: map[string]int{"503": 90}}
	var out bytes.Buffer
	err := reportSoak(c, idle, "", &out)
	if err == nil || !strings.Contains(err.Error(), "acknowledged sends 0 < 10, messages at the sink 3 < 10 (seed 7") {
		t.Fatalf("idle soak: %v\n%s", err, out.String())
	}
	busy := &soakReport{Acked: 10, AtSink: 10, Faults: map[string]int{faultKill: 1, faultStop: 1}}
	if err := reportSoak(c, busy, "", &out); err != nil {
		t.Fatalf("a soak at its floors: %v", err)
	}
}

// A lookup that meets a 503 or a timeout is tried again, with backoff; one
// refused as malformed is not.
func TestSoakLookup_RetriesWhatMayPass(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case r.URL.Query().Get("idempotency_key") == "bad":
			http.Error(w, `{"error":{"code":"invalid_request"}}`, http.StatusBadRequest)
		case n == 1:
			time.Sleep(300 * time.Millisecond) // longer than the client waits
		case n == 2:
			http.Error(w, `{"error":{"code":"service_unavailable"}}`, http.StatusServiceUnavailable)
		default:
			fmt.Fprint(w, `{"data":[{"id":"snd_1","status":"sent"}]}`)
		}
	}))
	defer srv.Close()
	n := newNode("api1", "api", "", t.TempDir(), nil)
	n.url.Store(&srv.URL)
	api := &soakAPI{cl: &clients{nodes: []*node{n}}, hc: &http.Client{Timeout: 100 * time.Millisecond}}
	sends, err := api.sendsFor(context.Background(), "k")
	if err != nil || len(sends) != 1 || calls.Load() != 3 {
		t.Fatalf("sends %v, err %v after %d calls; want snd_1 at the third", sends, err, calls.Load())
	}
	calls.Store(10)
	if _, err := api.sendsFor(context.Background(), "bad"); err == nil || calls.Load() != 11 {
		t.Fatalf("a 400: err %v after %d calls, want an error at once", err, calls.Load()-10)
	}
}

// A race-enabled process's reports, in its log, are violations.
func TestSoakRaces_CountedFromTheLogs(t *testing.T) {
	dir := t.TempDir()
	clean, racy := newNode("api1", "api", "", dir, nil), newNode("worker1", "worker", "", dir, nil)
	log := "---- soak: start 1\n==================\nWARNING: DATA RACE\nWrite at 0x00c by goroutine 7:\n" +
		"==================\n==================\nWARNING: DATA RACE\n"
	for n, text := range map[*node]string{clean: "level=INFO msg=listening\n", racy: log} {
		if err := os.WriteFile(n.log, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := &soakReport{}
	countRaces([]*node{clean, racy}, rep)
	if rep.Races != 2 || len(rep.Findings) != 1 || !strings.Contains(rep.Findings[0], "goroutine 7") || rep.violations() != 2 {
		t.Fatalf("races %d, findings %q", rep.Races, rep.Findings)
	}
}
