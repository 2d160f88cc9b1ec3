package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/webhooksig"
)

// The mx leg's checks have teeth: per recipient, a second copy at its
// exchanger is a duplicate (an unknown one too: mx never hands an unknown
// recipient over again by itself), delivered without a copy is a
// violation, a recipient still waiting is stuck, a failed one that was
// taken is wrong, and a copy of no send is an orphan.
func TestSoakJudgeMX_CountsEveryViolation(t *testing.T) {
	mv := mxView{byRcpt: map[string]int{}, byID: map[string]int{}}
	took := func(id, rcpt string, n int) {
		mv.byRcpt[mxKey(id, rcpt)] += n
		mv.byID[id] += n
	}
	took("m-ok", "a@a.test", 1)
	took("m-ok", "c@c.test", 1)
	took("m-twice", "a@a.test", 2)
	took("m-unk1", "a@a.test", 1)
	took("m-unk2", "a@a.test", 2)
	took("m-failed", "a@a.test", 1)
	took("m-stray", "x@a.test", 1)
	rcpt := func(email, status string) soakRecipient { return soakRecipient{Email: email, Status: status} }
	cases := []soakSend{
		{ID: "s1", Status: "delivered", MessageID: "<m-ok>", Recipients: []soakRecipient{rcpt("a@a.test", "delivered"), rcpt("C@c.test", "delivered")}},
		{ID: "s2", Status: "delivered", MessageID: "<m-twice>", Recipients: []soakRecipient{rcpt("a@a.test", "delivered")}},
		{ID: "s3", Status: "delivered", MessageID: "<m-none>", Recipients: []soakRecipient{rcpt("a@a.test", "delivered")}},
		{ID: "s4", Status: "unknown", MessageID: "<m-unk0>", Recipients: []soakRecipient{rcpt("a@a.test", "unknown")}},
		{ID: "s5", Status: "unknown", MessageID: "<m-unk1>", Recipients: []soakRecipient{rcpt("a@a.test", "unknown")}},
		{ID: "s6", Status: "unknown", MessageID: "<m-unk2>", Recipients: []soakRecipient{rcpt("a@a.test", "unknown")}},
		{ID: "s7", Status: "queued", MessageID: "<m-late>", Recipients: []soakRecipient{rcpt("a@a.test", "delivery_delayed")}},
		{ID: "s8", Status: "failed", MessageID: "<m-failed>", Recipients: []soakRecipient{rcpt("a@a.test", "failed")}},
	}
	rep := &soakReport{Statuses: map[string]int{}}
	seen := map[string]bool{}
	for i, s := range cases {
		l := &logical{key: fmt.Sprintf("k%d", i), mx: true, sendID: s.ID, bodies: []string{s.ID}}
		judge(l, []soakSend{s}, sinkView{mx: &mv}, seen, rep, func(string, *logical, string) {})
	}
	countMXOrphans(mv, seen, rep)
	got := [...]int{rep.MX.Delivered, rep.MX.Unknown, rep.MX.UnknownTaken, rep.Duplicates, rep.SentNotAt, rep.Stuck, rep.Other}
	// duplicates: m-twice and m-unk2 once more each; sent-not-at: s3;
	// stuck: s7; other: s8 taken yet failed, and m-stray.
	want := [...]int{4, 3, 1, 2, 1, 1, 2}
	if got != want {
		t.Fatalf("delivered, unknown, unknown taken, duplicates, sent-not-at, stuck, other = %v, want %v", got, want)
	}
}

// An exchanger that saw more connections at once, or more messages on
// one, than the shaping file allows (times the delivering processes for
// connections) is a violation; at the limits it is not.
func TestSoakPeaks_PastShapingIsAViolation(t *testing.T) {
	rep := &soakReport{}
	judgePeaks([]mxPeaks{
		{Domain: "at.test", PeakConns: 4, LimitConns: 4, PeakPerConn: 3, LimitPer: 3},
		{Domain: "conns.test", PeakConns: 5, LimitConns: 4, PeakPerConn: 1, LimitPer: 3},
		{Domain: "per.test", PeakConns: 1, LimitConns: 4, PeakPerConn: 4, LimitPer: 3},
	}, rep)
	if rep.PastShaping != 2 || rep.violations() != 2 || len(rep.Findings) != 2 ||
		!strings.Contains(rep.Findings[0], "conns.test saw 5") || !strings.Contains(rep.Findings[1], "per.test took 4") {
		t.Fatalf("past shaping %d, findings %q", rep.PastShaping, rep.Findings)
	}
}

// The webhook leg's checks have teeth: an event never answered 2xx, or
// answered and not marked success, is lost; a webhook-id seen with two
// bodies, with a body of another event, or a body under two ids is a
// mismatch, and so is an id the database does not hold and an attempt
// without a good signature.
func TestSoakJudgeHooks_CountsEveryViolation(t *testing.T) {
	body := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }
	seenAs := func(typ, email string, acked int, bodies ...string) *hookSeen {
		s := &hookSeen{bodies: map[[32]byte]bool{}, typ: typ, emailID: email, tries: acked + 1, acked: acked}
		for _, b := range bodies {
			s.bodies[body(b)] = true
		}
		return s
	}
	seen := map[string]*hookSeen{
		"evt_ok":      seenAs("email.delivered", "snd_1", 2, "b1"),
		"evt_failed":  seenAs("email.delivered", "snd_2", 0, "b2"),
		"evt_pending": seenAs("email.unknown", "snd_3", 1, "b3"),
		"evt_bodies":  seenAs("email.delivered", "snd_4", 1, "b4", "b4'"),
		"evt_other":   seenAs("email.delivered", "snd_9", 1, "b5"),
		"evt_stray":   seenAs("email.delivered", "snd_6", 1, "b6"),
		"evt_same":    seenAs("email.delivered", "snd_7", 1, "b7"),
	}
	byBody := map[[32]byte]map[string]bool{body("b7"): {"evt_same": true, "evt_ok": true}}
	ds := []hookDelivery{
		{ID: "evt_ok", Type: "email.delivered", EmailID: "snd_1", Status: "success"},
		{ID: "evt_failed", Type: "email.delivered", EmailID: "snd_2", Status: "failed"},
		{ID: "evt_pending", Type: "email.unknown", EmailID: "snd_3", Status: "pending"},
		{ID: "evt_bodies", Type: "email.delivered", EmailID: "snd_4", Status: "success"},
		{ID: "evt_other", Type: "email.delivered", EmailID: "snd_5", Status: "success"},
		{ID: "evt_missing", Type: "email.delivered", EmailID: "snd_8", Status: "success"},
		{ID: "evt_same", Type: "email.delivered", EmailID: "snd_7", Status: "success"},
		{ID: "evt_late", Type: "email.delivered", EmailID: "snd_10", Status: "pending"},
	}
	// lost: evt_failed (never answered 2xx), evt_missing, and, when the
	// backlog had stalled, evt_pending (answered, not success) and
	// evt_late (pending, never answered); while it still shrank evt_late
	// is backlog and evt_pending delivered, neither lost;
	// mismatch: evt_bodies, evt_other, evt_stray, the body under two ids,
	// and the 2 unsigned attempts.
	for _, c := range []struct {
		backlog bool
		want    [6]int
	}{{false, [6]int{8, 5, 1, 4, 6, 0}}, {true, [6]int{8, 5, 1, 2, 6, 1}}} {
		rep := &soakReport{}
		judgeHooks(ds, seen, byBody, 2, c.backlog, rep)
		got := [...]int{rep.Webhooks.Events, rep.Webhooks.Delivered, rep.Webhooks.Redelivered, rep.WebhookLost, rep.WebhookMismatch, rep.Webhooks.Backlog}
		if got != c.want {
			t.Fatalf("backlog=%v: events, delivered, redelivered, lost, mismatch, backlog = %v, want %v\n%s", c.backlog, got, c.want, strings.Join(rep.Findings, "\n"))
		}
	}
}

// The endpoint is a real HTTP server: it checks each attempt's signature
// with the webhook's secret, keeps its webhook-id and body, answers 204
// outside its windows, and inside a window fails about half the attempts
// as the window says (here 500s and resets).
func TestSoakHookEndpoint_SignsChecksAndFailsInWindows(t *testing.T) {
	l, err := startHookLeg(1, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	secret, _ := webhooksig.NewSecret()
	l.secret = secret
	post := func(id, body, signWith string) int {
		req, _ := http.NewRequest(http.MethodPost, l.url, strings.NewReader(body))
		if err := webhooksig.SetHeaders(req.Header, signWith, id, time.Now(), []byte(body)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0 // reset
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post("evt_1", `{"type":"email.delivered","data":{"email_id":"snd_1"}}`, secret); st != http.StatusNoContent {
		t.Fatalf("outside a window: %d, want 204", st)
	}
	other, _ := webhooksig.NewSecret()
	post("evt_2", `{"type":"email.delivered","data":{"email_id":"snd_2"}}`, other)

	l.windows = []hookWindow{{at: 0, hold: time.Minute, kind: hook500}, {at: time.Minute, hold: time.Minute, kind: hookReset}}
	l.run(time.Now())
	var answers []int
	for i := range 20 {
		answers = append(answers, post(fmt.Sprintf("evt_w%d", i), fmt.Sprintf(`{"type":"email.unknown","n":%d}`, i), secret))
	}
	l.run(time.Now().Add(-time.Minute)) // now inside the reset window
	for i := range 20 {
		answers = append(answers, post(fmt.Sprintf("evt_r%d", i), fmt.Sprintf(`{"type":"email.unknown","r":%d}`, i), secret))
	}
	for _, want := range []int{http.StatusNoContent, http.StatusInternalServerError, 0} {
		if !slices.Contains(answers, want) {
			t.Fatalf("answers in the windows %v: none was %d", answers, want)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.seen["evt_1"]; s == nil || s.acked != 1 || s.typ != "email.delivered" || s.emailID != "snd_1" {
		t.Fatalf("evt_1 seen as %+v", s)
	}
	if l.badSig != 1 || l.seen["evt_2"] != nil {
		t.Fatalf("bad signatures %d, evt_2 %+v: want the attempt signed with another secret refused", l.badSig, l.seen["evt_2"])
	}
}

// The legs draw their windows from streams of their own: a seed names the
// same windows every time, and the legs leave the fault schedule of the
// seed as it was; each kind comes once in every round of windows.
func TestSoakLegs_WindowsOfTheirOwn(t *testing.T) {
	a, b := drawMXWindows(newStream(16, "mx schedule"), time.Minute), drawMXWindows(newStream(16, "mx schedule"), time.Minute)
	h1, h2 := drawHookWindows(newStream(16, "hook schedule"), time.Minute), drawHookWindows(newStream(16, "hook schedule"), time.Minute)
	if !slices.Equal(a, b) || !slices.Equal(h1, h2) || len(a) < 5 || len(h1) < 3 {
		t.Fatalf("mx windows %v / %v, hook windows %v / %v", a, b, h1, h2)
	}
	for i, w := range a {
		if w.at >= time.Minute || w.dest < 0 || w.dest >= len(mxDests) || (i > 0 && w.at < a[i-1].at+a[i-1].hold) {
			t.Fatalf("mx window %d %+v out of bounds or overlapping", i, w)
		}
	}
	// Each kind once in every round: a minute's soak meets every one.
	for i := 0; i+4 <= len(a); i += 4 {
		if kinds := map[string]bool{a[i].kind: true, a[i+1].kind: true, a[i+2].kind: true, a[i+3].kind: true}; len(kinds) != 4 {
			t.Fatalf("mx windows %d–%d: kinds %v, want all 4", i, i+3, kinds)
		}
	}
	for i := 0; i+3 <= len(h1); i += 3 {
		if kinds := map[string]bool{h1[i].kind: true, h1[i+1].kind: true, h1[i+2].kind: true}; len(kinds) != 3 {
			t.Fatalf("hook windows %d–%d: kinds %v, want all 3", i, i+2, kinds)
		}
	}
}
