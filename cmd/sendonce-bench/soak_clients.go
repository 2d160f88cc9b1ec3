package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/internal/lifecycle"
)

// A logical send of the soak: one key and one body, posted until a 200
// (or until the clients give up, after the heal), its every try kept for
// the report.
type logical struct {
	key  string
	body string
	// subject is the body's subject, this logical send's own: the
	// provider soak counts SES's copies by it.
	subject string
	// mx: the send goes to the mx leg's shaped destinations.
	mx bool

	mu      sync.Mutex
	tries   []try
	bodies  []string // distinct 200 bodies, in order
	sendID  string   // from the first 200
	statusN map[int]int
}

type try struct {
	at     time.Duration // since the soak began
	node   string
	status int    // 0: no answer
	err    string // the transport error, or the error code of a 4xx/5xx
}

func (l *logical) acked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sendID != ""
}

func (l *logical) history() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "key %s:", l.key)
	for _, t := range l.tries {
		fmt.Fprintf(&b, " [%.3fs %s %d %s]", t.at.Seconds(), t.node, t.status, t.err)
	}
	return b.String()
}

// clientPause is each client's pause between logical sends, and retryPause
// the pause before a retry of the same key.
const (
	clientPause   = 10 * time.Millisecond
	retryPause    = 50 * time.Millisecond
	clientTimeout = 3 * time.Second
)

// clients posts logical sends from n goroutines: new keys until newUntil
// ends, then only retries of the key in hand until giveUp ends. Every
// answer other than 200 is retried with the same key and body: 409 (a
// try still running), 5xx and no answer (a fault). A 4xx other than 409
// and 429 is a finding: the soak's bodies are valid.
type clients struct {
	apiKey string
	nodes  []*node // the ones that serve the API
	seed   uint64  // each client draws from a stream of its own
	start  time.Time
	hc     *http.Client
	// mx: the mx leg runs; a send at most every mxGap goes to its
	// destinations, the others to the sink through the mailbox
	// sinkMailbox. lastMX and mxN (the leg's sends so far) are under mu.
	mx     bool
	lastMX time.Time
	mxN    int

	mu       sync.Mutex
	all      []*logical
	statuses map[string]int
	seq      atomic.Int64
}

func newClients(apiKey string, nodes []*node, seed uint64, start time.Time, n int) *clients {
	return &clients{apiKey: apiKey, nodes: nodes, seed: seed, start: start, statuses: map[string]int{},
		hc: &http.Client{Timeout: clientTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: n}}}
}

func (c *clients) run(newUntil, giveUp context.Context, n int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := newStream(c.seed, fmt.Sprintf("client %d", i+1))
			for newUntil.Err() == nil {
				l := c.newLogical()
				c.drive(giveUp, g, l)
				lifecycle.Sleep(newUntil, clientPause)
			}
		}()
	}
	wg.Wait()
}

func (c *clients) newLogical() *logical {
	i := c.seq.Add(1)
	k := fmt.Sprintf("soak-%d-%s", i, newKey()[6:14])
	l := &logical{key: k, statusN: map[int]int{}, subject: fmt.Sprintf("Soak %d", i),
		body: fmt.Sprintf(`{"to":"soak%d@example.com","subject":"Soak %d","text":"Logical send %d of the soak."}`, i%97, i, i)}
	n, mx := c.takeMX()
	switch {
	case mx:
		to, _ := json.Marshal(mxRecipients(i, n))
		l.mx = true
		l.body = fmt.Sprintf(`{"to":%s,"subject":"Soak %d","text":"Logical send %d of the soak, through mx."}`, to, i, i)
	case c.mx:
		l.body = fmt.Sprintf(`{"to":"soak%d@example.com","mailbox_id":%q,"subject":"Soak %d","text":"Logical send %d of the soak."}`,
			i%97, sinkMailbox, i, i)
	}
	c.mu.Lock()
	c.all = append(c.all, l)
	c.mu.Unlock()
	return l
}

// takeMX says whether the next send goes to the mx leg, and its number
// there: one every mxGap at most, however fast the clients go, so that
// the shaped destinations are offered less than their limits take and
// their queue drains (the sink's share is what the clients can do).
func (c *clients) takeMX() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mx {
		return 0, false
	}
	if now := time.Now(); now.Sub(c.lastMX) >= mxGap {
		c.lastMX = now
		c.mxN++
		return c.mxN, true
	}
	return 0, false
}

// drive posts l until a 200, then once more to see the replay, or until
// giveUp ends; g is the client's stream, which picks the process of each
// try.
func (c *clients) drive(giveUp context.Context, g *rng, l *logical) {
	replayed := false
	for giveUp.Err() == nil {
		n := c.nodes[g.intN(len(c.nodes))]
		url := n.URL()
		if url == "" {
			url = c.anyURL()
		}
		if url == "" {
			lifecycle.Sleep(giveUp, retryPause)
			continue
		}
		st, body, err := c.post(giveUp, url, l)
		if giveUp.Err() != nil && st == 0 {
			return
		}
		t := try{at: time.Since(c.start), node: n.name, status: st}
		label := fmt.Sprint(st)
		if err != nil {
			t.err, label = shortErr(err), "no-answer"
		} else if st != http.StatusOK {
			t.err = errorCode(body)
		}
		c.mu.Lock()
		c.statuses[label]++
		c.mu.Unlock()
		l.mu.Lock()
		l.tries = append(l.tries, t)
		if st == http.StatusOK {
			if l.sendID == "" {
				var v struct{ ID string }
				_ = json.Unmarshal(body, &v)
				l.sendID = v.ID
				if l.sendID == "" {
					l.sendID = "?" // a 200 without an id: the check reports it
				}
			}
			if !slices.Contains(l.bodies, string(body)) {
				l.bodies = append(l.bodies, string(body))
			}
		}
		l.mu.Unlock()
		switch {
		case st == http.StatusOK && replayed:
			return
		case st == http.StatusOK:
			replayed = true // one more try: the replay must be the same answer
		case st >= 400 && st < 500 && st != http.StatusConflict && st != http.StatusTooManyRequests && st != 499:
			return // refused: the check reports it
		default:
			lifecycle.Sleep(giveUp, retryPause)
		}
	}
}

func (c *clients) anyURL() string {
	for _, n := range c.nodes {
		if u := n.URL(); u != "" {
			return u
		}
	}
	return ""
}

func (c *clients) post(ctx context.Context, url string, l *logical) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/send", strings.NewReader(l.body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Idempotency-Key", l.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// setUp POSTs body to path with an Idempotency-Key through any API
// process until a 2xx (a few tries: a process may be restarting), and
// returns the answer's body. The soak makes its inbox, mailbox and
// webhook this way before the faults begin.
func (c *clients) setUp(ctx context.Context, path, key, body string) ([]byte, error) {
	var last string
	for try := 0; try < lookupTries; try++ {
		if base := c.anyURL(); base != "" {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer "+c.apiKey)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			resp, err := c.hc.Do(req)
			if err == nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					return b, nil
				}
				last = fmt.Sprintf("%d %s", resp.StatusCode, b)
			} else {
				last = err.Error()
			}
		}
		lifecycle.Sleep(ctx, lookupBackoff)
	}
	return nil, fmt.Errorf("soak: POST %s: %s", path, last)
}

func (c *clients) logicals() []*logical {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*logical(nil), c.all...)
}

func (c *clients) statusFigures() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.statuses)
}

func errorCode(body []byte) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// shortErr keeps the end of a transport error (the part that says what
// happened), without the URL.
func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return strings.ReplaceAll(s, " ", "_")
}
