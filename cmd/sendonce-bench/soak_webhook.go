package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sendonce/sendonce/webhooksig"
)

// The webhook leg of the soak: an endpoint, an HTTP server in the soak's
// process on loopback, gets the tenant's send events while the soak runs.
// In windows of a schedule drawn from the leg's own stream it fails half
// of the attempts — a 500, an answer held past the delivery timeout, or
// a reset connection — and between them answers 204. Every attempt's
// signature is checked and its webhook-id and body kept: the checks
// (soak_webhook_check.go) want every event the database holds for the
// endpoint answered 2xx at least once, and one event always under one
// webhook-id with the same bytes.

// hookEvents are the event types the endpoint subscribes to: those of
// outcomes after the handoff, a few per send, so that the endpoint's
// traffic stays a fraction of the sends' (every send type would double
// the soak's writes).
var hookEvents = []string{"email.delivered", "email.delivery_delayed", "email.unknown"}

// hookSchedule is the processes' --webhook-retry-schedule: short waits,
// and enough of them (about 30 s of failures) that no delivery uses them
// up in the leg's windows, which fail only half the attempts.
const hookSchedule = "250ms,500ms,1s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s"

// hookHang is how long a hanging answer is held: past the webhook
// worker's 10 s timeout (webhook.Timeout), so the attempt fails on it.
const hookHang = 11 * time.Second

// The kinds of the endpoint's windows.
const (
	hook500   = "hook-500"   // half the attempts answered 500
	hookHangs = "hook-hang"  // half the attempts held past the timeout
	hookReset = "hook-reset" // half the connections reset before an answer
)

// hookWindow is one window of the endpoint's failures.
type hookWindow struct {
	at, hold time.Duration
	kind     string
}

// drawHookWindows draws the endpoint's windows from g: a pause of 4–10 s
// before each, 1–4 s long, the kinds in rounds (each once in every three
// windows).
func drawHookWindows(g *rng, duration time.Duration) []hookWindow {
	kinds := &rounds{g: g, kinds: []string{hook500, hookReset, hookHangs}}
	var out []hookWindow
	for at := time.Duration(0); ; {
		at += g.between(4*time.Second, 10*time.Second)
		if at >= duration {
			return out
		}
		w := hookWindow{at: at, kind: kinds.next(), hold: g.between(time.Second, 4*time.Second)}
		out = append(out, w)
		at += w.hold
	}
}

// hookSeen is what the endpoint saw of one webhook-id.
type hookSeen struct {
	bodies  map[[32]byte]bool
	typ     string // the body's type and data.email_id
	emailID string
	tries   int
	acked   int // answered 2xx
}

// hookLeg is the endpoint and its record.
type hookLeg struct {
	srv     *http.Server
	url     string
	windows []hookWindow
	rng     *rng
	done    chan struct{} // closed at close: held answers end
	logger  *slog.Logger

	mu       sync.Mutex
	start    time.Time // zero until run: no window before
	healed   bool
	secret   string
	id       string // the webhook's wh_ id
	seen     map[string]*hookSeen
	byBody   map[[32]byte]map[string]bool // body → the webhook-ids it came under
	badSig   int
	answered map[string]int // attempts by how they were answered
}

// startHookLeg starts the endpoint on 127.0.0.1.
func startHookLeg(seed uint64, duration time.Duration, logger *slog.Logger) (*hookLeg, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("soak webhooks: %w", err)
	}
	l := &hookLeg{url: "http://" + ln.Addr().String() + "/hook", rng: newStream(seed, "hook endpoint"), done: make(chan struct{}),
		windows: drawHookWindows(newStream(seed, "hook schedule"), duration), logger: logger,
		seen: map[string]*hookSeen{}, byBody: map[[32]byte]map[string]bool{}, answered: map[string]int{}}
	l.srv = &http.Server{Handler: http.HandlerFunc(l.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

func (l *hookLeg) close() {
	close(l.done)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.srv.Shutdown(ctx)
}

// args are the processes' flags for the leg.
func (l *hookLeg) args() []string {
	return []string{"--webhook-allow-private", "--webhook-retry-schedule", hookSchedule}
}

// create makes the endpoint's webhook through the API and keeps its id
// and signing secret.
func (l *hookLeg) create(ctx context.Context, cl *clients) error {
	b, _ := json.Marshal(map[string]any{"endpoint": l.url, "events": hookEvents})
	body, err := cl.setUp(ctx, "/v1/webhooks", "soak-webhook", string(b))
	if err != nil {
		return err
	}
	var v struct {
		ID     string `json:"id"`
		Secret string `json:"signing_secret"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.ID == "" || v.Secret == "" {
		return fmt.Errorf("soak webhooks: the webhook was made without an id or secret: %s", body)
	}
	l.mu.Lock()
	l.id, l.secret = v.ID, v.Secret
	l.mu.Unlock()
	return nil
}

// run sets the windows' clock; heal ends them (the drain sees none).
func (l *hookLeg) run(start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.start = start
}

func (l *hookLeg) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.healed = true
}

// mode is the window on now, "" for none, and whether this attempt is
// one of the half it strikes.
func (l *hookLeg) mode() string {
	l.mu.Lock()
	start, healed := l.start, l.healed
	l.mu.Unlock()
	if start.IsZero() || healed {
		return ""
	}
	off := time.Since(start)
	for _, w := range l.windows {
		if off >= w.at && off < w.at+w.hold {
			if l.rng.chance(500) {
				return w.kind
			}
			return ""
		}
	}
	return ""
}

// windowCounts counts the windows that began before now (or the heal).
func (l *hookLeg) windowCounts(until time.Duration) map[string]int {
	out := map[string]int{}
	for _, w := range l.windows {
		if w.at < until {
			out[w.kind]++
		}
	}
	return out
}

// serve is the endpoint: it checks and records the attempt, then answers
// as the window on now says.
func (l *hookLeg) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	mode := l.mode()
	l.record(r.Header, body, mode == "")
	switch mode {
	case hook500:
		http.Error(w, "soak: failing for now", http.StatusInternalServerError)
	case hookHangs:
		select {
		case <-time.After(hookHang):
		case <-l.done:
		}
		// Never a 2xx: a worker SIGSTOPped across its timeout may still
		// read this answer when it resumes, and a 204 here would be a
		// delivery the endpoint did not count (the 30-minute soak of
		// 2 December met five).
		http.Error(w, "soak: held past the timeout", http.StatusServiceUnavailable)
	case hookReset:
		reset(w)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// reset closes the attempt's connection with a RST instead of an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "soak: no hijack", http.StatusInternalServerError)
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST
	}
	conn.Close()
}

// record keeps one attempt: its signature checked, its webhook-id and
// body, and whether it is answered 2xx (acked).
func (l *hookLeg) record(h http.Header, body []byte, acked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := h.Get("webhook-id")
	label := "204"
	if !acked {
		label = "failed"
	}
	l.answered[label]++
	if err := webhooksig.Verify(l.secret, h, body, 5*time.Minute, time.Now()); err != nil || id == "" {
		l.badSig++
		l.logger.Warn("webhook attempt without a good signature", slog.String("webhook-id", id), slog.Any("error", err))
		return
	}
	sum := sha256.Sum256(body)
	s := l.seen[id]
	if s == nil {
		s = &hookSeen{bodies: map[[32]byte]bool{}}
		var p struct {
			Type string `json:"type"`
			Data struct {
				EmailID string `json:"email_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &p)
		s.typ, s.emailID = p.Type, p.Data.EmailID
		l.seen[id] = s
	}
	s.bodies[sum] = true
	s.tries++
	if acked {
		s.acked++
	}
	if l.byBody[sum] == nil {
		l.byBody[sum] = map[string]bool{}
	}
	l.byBody[sum][id] = true
}

var errHookNotMade = errors.New("soak webhooks: no webhook was made")
