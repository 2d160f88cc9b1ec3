// Command sendonce-bench is sendonce's load tool. It drives POST /v1/send
// against one or more running servers, or starts them itself (with a
// built-in SMTP sink), and prints one table of throughput, latency
// percentiles, errors, duplicates and peak memory.
//
//	sendonce-bench --url http://127.0.0.1:8787 --key so_… --mode new --duration 10s
//	sendonce-bench --spawn-api 3 --db postgres://…/bench --mode new
//	sendonce-bench --spawn-api 1 --db sqlite:/tmp/b/s.db --sendonce ./sendonce --mode all --json out.json
//	sendonce-bench --baseline 127.0.0.1:8788   # the bare net/http yardstick
//
// Modes: new (a fresh Idempotency-Key per request), replay (the same keys
// again), storm (N keys × K concurrent duplicates, then every key looked up:
// exactly one send each), delivery (new sends through the sink: accepted →
// 250 at the sink) and all (the four in turn).
//
// Mode soak is the randomized fault soak (see soak.go): it runs sendonce
// itself, on SQLite (one process) or PostgreSQL (--spawn-api API and
// --soak-workers worker processes), under a seeded schedule of faults,
// then heals and checks that nothing was sent twice, lost or left stuck:
//
//	sendonce-bench --mode soak --db sqlite:/tmp/soak/s.db --sendonce ./sendonce --duration 30m --seed 7
//
// Every request goes to the 127.0.0.1-style addresses you give it or to the
// processes it started on 127.0.0.1; every phase is bounded by --duration
// or a count, and every wait by a timeout.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sendonce-bench:", err)
		os.Exit(1)
	}
}

// Bounds on the waits after a run.
const (
	// deliveryWait bounds how long the delivery mode waits for the accepted
	// sends to reach the sink, and the wait for the worker's backlog before
	// it.
	deliveryWait = 2 * time.Minute
	pollEvery    = 20 * time.Millisecond
	httpTimeout  = 30 * time.Second
)

type config struct {
	urls        []string
	key         string
	mode        string
	duration    time.Duration
	concurrency int
	replayKeys  int
	stormKeys   int
	stormDupes  int
	jsonFile    string
	spawnAPI    int
	db          string
	binary      string
	// to is the recipient of every send; the delivery mode gives each run
	// its own, so the sink can tell its messages from earlier ones.
	to string
	// drainWait bounds the delivery mode's waits (deliveryWait).
	drainWait time.Duration
}

var modes = []string{"new", "replay", "storm", "delivery"}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sendonce-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var urls string
	fs.StringVar(&urls, "url", "http://127.0.0.1:8787", "comma-separated base URLs; requests are spread round robin")
	fs.StringVar(&c.key, "key", os.Getenv("SENDONCE_API_KEY"), "API key with the send and read scopes (env SENDONCE_API_KEY)")
	fs.StringVar(&c.mode, "mode", "new", "new, replay, storm, delivery (needs --spawn-api), all, or soak (the randomized fault soak: needs --db)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each mode sends")
	fs.IntVar(&c.concurrency, "concurrency", 32, "requests in flight")
	fs.IntVar(&c.replayKeys, "replay-keys", 200, "keys created before a replay run")
	fs.IntVar(&c.stormKeys, "storm-keys", 1000, "storm: at most this many keys, each sent --storm-dupes times at once")
	fs.IntVar(&c.stormDupes, "storm-dupes", 8, "storm: concurrent duplicates per key")
	fs.StringVar(&c.jsonFile, "json", "", "also write the rows as JSON to this file (- for standard output)")
	fs.IntVar(&c.spawnAPI, "spawn-api", 0, "start this many `sendonce serve --role api` processes (plus one worker) on --db; 1 on SQLite: one process in both roles")
	fs.StringVar(&c.db, "db", "", "database for --spawn-api (sqlite:PATH or postgres://…)")
	fs.StringVar(&c.binary, "sendonce", "sendonce", "the sendonce binary for --spawn-api")
	sinkAddr := fs.String("sink", "", "only serve the built-in SMTP sink on this address (a relay for a server started by hand)")
	baseline := fs.String("baseline", "", "only serve the yardstick — bare net/http answering a JSON POST — on this address, for wrk or this tool")
	seed := fs.Uint64("seed", 0, "soak: seed of the fault schedule (0: one from the clock, printed)")
	soakWorkers := fs.Int("soak-workers", 2, "soak on PostgreSQL: worker processes (API processes: --spawn-api, default 2)")
	soakDir := fs.String("soak-dir", "", "soak: directory for the database file and the processes' logs (default: a new temporary one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.mode == "soak" {
		return soakMode(ctx, c, *seed, *soakWorkers, *soakDir, stdout, stderr)
	}
	if *baseline != "" {
		return serveBaseline(ctx, *baseline, stdout)
	}
	if *sinkAddr != "" {
		return serveSink(ctx, *sinkAddr, stdout)
	}
	c.urls = strings.Split(urls, ",")
	c.to = "bench@example.com"
	c.drainWait = deliveryWait
	if c.concurrency < 1 || c.replayKeys < 1 || c.stormKeys < 1 || c.stormDupes < 1 || c.duration <= 0 {
		return errors.New("--concurrency, --replay-keys, --storm-keys, --storm-dupes and --duration must be positive")
	}
	todo := []string{c.mode}
	switch {
	case c.mode == "all":
		todo = modes
		if c.spawnAPI == 0 {
			todo = modes[:3]
			fmt.Fprintln(stderr, "sendonce-bench: skipping delivery: it needs --spawn-api (the servers must relay to the built-in sink)")
		}
	case c.mode == "delivery" && c.spawnAPI == 0:
		return errors.New("--mode delivery needs --spawn-api: the servers must relay to the built-in SMTP sink")
	case !slices.Contains(modes, c.mode):
		return fmt.Errorf("--mode %q: want new, replay, storm, delivery or all", c.mode)
	}

	var (
		sk *sink
		cl *cluster
	)
	if c.spawnAPI > 0 {
		transport := ""
		if slices.Contains(todo, "delivery") {
			var err error
			if sk, err = startSink(); err != nil {
				return err
			}
			defer sk.close()
			transport = "smtp://" + sk.addr + "?tls=none"
		}
		var err error
		if cl, err = spawn(ctx, c.binary, c.db, transport, c.spawnAPI); err != nil {
			return err
		}
		defer cl.stop()
		c.urls, c.key = cl.urls, cl.key
	}
	if c.key == "" {
		return errors.New("--key (or SENDONCE_API_KEY) is required")
	}

	var (
		rows     []*result
		accepted int // sends made so far, all of which the worker delivers
	)
	for _, m := range todo {
		var (
			res *result
			err error
		)
		switch m {
		case "new", "replay":
			mc := c
			mc.mode = m
			res, err = load(ctx, mc)
		case "storm":
			res, err = storm(ctx, c)
		case "delivery":
			// Let the worker finish the earlier modes' sends first, so that
			// they do not share its time with this run's.
			if !waitFor(ctx, c.drainWait, func() bool { return sk.messages() >= accepted }) {
				fmt.Fprintf(stderr, "sendonce-bench: %d of %d earlier sends delivered after %s; measuring delivery anyway\n",
					sk.messages(), accepted, c.drainWait)
			}
			res, err = delivery(ctx, c, sk.count)
		}
		if err != nil {
			return fmt.Errorf("mode %s: %w", m, err)
		}
		accepted += res.Sends
		if cl != nil {
			res.PeakRSSKiB = cl.peakRSSKiB()
		}
		rows = append(rows, res)
	}
	if err := printTable(stdout, rows); err != nil {
		return err
	}
	return writeJSON(c.jsonFile, stdout, rows)
}

func printTable(w io.Writer, rows []*result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tservers\tconcurrency\trequests\treq/s\tp50\tp99\tp999\terrors\tduplicates\tdelivered/s\tpeak RSS\t")
	for _, r := range rows {
		dups, dps, rss := "-", "-", "-"
		if r.Duplicates != nil {
			dups = fmt.Sprint(*r.Duplicates)
		}
		if r.Mode == "delivery" {
			dps = fmt.Sprintf("%.0f", r.DeliveredPerSecond)
		}
		if r.PeakRSSKiB > 0 {
			rss = fmt.Sprintf("%.0fMiB", float64(r.PeakRSSKiB)/1024)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", r.Mode, r.Servers, r.Concurrency, r.Requests,
			r.PerSecond, ms(r.P50), ms(r.P99), ms(r.P999), r.Errors, dups, dps, rss)
	}
	return tw.Flush()
}

func writeJSON(file string, stdout io.Writer, rows []*result) error {
	if file == "" {
		return nil
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if file == "-" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// result is one row: one mode's run.
type result struct {
	Mode        string `json:"mode"`
	Servers     int    `json:"servers"`
	Concurrency int    `json:"concurrency"`
	// Requests counts every answered request; Sends the sends it created
	// (200s with new keys).
	Requests  int            `json:"requests"`
	Sends     int            `json:"sends"`
	Seconds   float64        `json:"seconds"`
	PerSecond float64        `json:"per_second"`
	P50       time.Duration  `json:"p50_ns"`
	P99       time.Duration  `json:"p99_ns"`
	P999      time.Duration  `json:"p999_ns"`
	Errors    int            `json:"errors"`
	Statuses  map[string]int `json:"statuses"`
	// Duplicates is checked by replay, storm and delivery: sends beyond
	// one per key, or messages beyond one per send at the sink.
	Duplicates *int `json:"duplicates,omitempty"`
	// Delivered is how many of this run's sends reached the sink, and
	// DeliveredPerSecond that count over the time from the first request
	// to the last arrival (delivery mode).
	Delivered          int     `json:"delivered,omitempty"`
	DeliveredPerSecond float64 `json:"delivered_per_second,omitempty"`
	// PeakRSSKiB is the largest VmHWM of the spawned processes at the end
	// of the run (0 when none were spawned).
	PeakRSSKiB int64 `json:"peak_rss_kib,omitempty"`
}

func newKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "bench-" + hex.EncodeToString(b[:])
}

func sendBody(to string) string {
	return `{"to":"` + to + `","subject":"Load test","text":"Hello from sendonce-bench."}`
}

func post(ctx context.Context, hc *http.Client, url, apiKey, idemKey, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/send", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", idemKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func newClient(conns int) *http.Client {
	return &http.Client{Timeout: httpTimeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
	}}
}

// recorder gathers the latencies and statuses of a run's goroutines.
type recorder struct {
	mu        sync.Mutex
	latencies []time.Duration
	statuses  map[string]int
}

func (r *recorder) add(lat []time.Duration, statuses map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.statuses == nil {
		r.statuses = map[string]int{}
	}
	r.latencies = append(r.latencies, lat...)
	for s, v := range statuses {
		r.statuses[s] += v
	}
}

// result sums the run up; statuses other than ok count as errors.
func (r *recorder) result(mode string, c config, elapsed time.Duration, ok ...string) *result {
	r.mu.Lock()
	defer r.mu.Unlock()
	slices.Sort(r.latencies)
	pct := func(p float64) time.Duration {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))]
	}
	res := &result{Mode: mode, Servers: len(c.urls), Concurrency: c.concurrency, Requests: len(r.latencies),
		Seconds: elapsed.Seconds(), PerSecond: float64(len(r.latencies)) / elapsed.Seconds(),
		P50: pct(0.50), P99: pct(0.99), P999: pct(0.999), Statuses: map[string]int{}}
	for s, v := range r.statuses {
		res.Statuses[s] = v
		if !slices.Contains(ok, s) {
			res.Errors += v
		}
	}
	return res
}

// load sends for c.duration from c.concurrency goroutines: new keys, or in
// replay mode the same c.replayKeys keys again. A request under way when
// the time is up is waited for and counted, so the counts are exact.
func load(ctx context.Context, c config) (*result, error) {
	hc := newClient(c.concurrency)
	body := sendBody(c.to)
	var keys []string
	if c.mode == "replay" {
		for i := range c.replayKeys {
			k := newKey()
			if st, err := post(ctx, hc, c.urls[i%len(c.urls)], c.key, k, body); err != nil || st != http.StatusOK {
				return nil, fmt.Errorf("prepare replay keys: status %d, %v", st, err)
			}
			keys = append(keys, k)
		}
	}
	var (
		rec recorder
		n   atomic.Int64
		wg  sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(c.duration)
	for w := range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			localStatus := map[string]int{}
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				seq := n.Add(1)
				url := c.urls[int(seq)%len(c.urls)]
				k := ""
				if c.mode == "replay" {
					k = keys[(w+i)%len(keys)]
				} else {
					k = newKey()
				}
				t0 := time.Now()
				st, err := post(ctx, hc, url, c.key, k, body)
				if ctx.Err() != nil {
					break // interrupted: the run is abandoned
				}
				local = append(local, time.Since(t0))
				if err != nil {
					localStatus["error"]++
				} else {
					localStatus[fmt.Sprint(st)]++
				}
			}
			rec.add(local, localStatus)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := rec.result(c.mode, c, time.Since(start), "200")
	if c.mode == "replay" {
		res.Sends = len(keys)
		dups, missing, err := countSends(ctx, hc, c, keys)
		if err != nil {
			return nil, err
		}
		res.Duplicates = &dups
		if missing > 0 {
			res.Statuses["missing"] = missing
			res.Errors += missing
		}
	} else {
		res.Sends = res.Statuses["200"]
	}
	return res, nil
}

// storm sends each of up to c.stormKeys keys c.stormDupes times at once
// (released together, spread round robin over the servers), with about
// c.concurrency requests in flight, until the keys or c.duration run out.
// 200 (first or replay) and 409 (in flight) are the expected answers. Then
// every stormed key is looked up: exactly one send each.
func storm(ctx context.Context, c config) (*result, error) {
	hc := newClient(max(c.concurrency, c.stormDupes))
	body := sendBody(c.to)
	keys := make([]string, c.stormKeys)
	for i := range keys {
		keys[i] = newKey()
	}
	var (
		rec  recorder
		next atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(c.duration)
	for range max(1, c.concurrency/c.stormDupes) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(keys) {
					return
				}
				var (
					gw    sync.WaitGroup
					ready = make(chan struct{})
				)
				for d := range c.stormDupes {
					gw.Add(1)
					go func() {
						defer gw.Done()
						<-ready
						t0 := time.Now()
						st, err := post(ctx, hc, c.urls[(i+d)%len(c.urls)], c.key, keys[i], body)
						lat := []time.Duration{time.Since(t0)}
						switch {
						case ctx.Err() != nil:
						case err != nil:
							rec.add(lat, map[string]int{"error": 1})
						default:
							rec.add(lat, map[string]int{fmt.Sprint(st): 1})
						}
					}()
				}
				close(ready)
				gw.Wait()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := rec.result("storm", c, time.Since(start), "200", "409")
	stormed := keys[:min(int(next.Load()), len(keys))]
	dups, missing, err := countSends(ctx, hc, c, stormed)
	if err != nil {
		return nil, err
	}
	res.Duplicates = &dups
	res.Sends = len(stormed) - missing + dups
	if missing > 0 {
		res.Statuses["missing"] = missing
		res.Errors += missing
	}
	return res, nil
}

// countSends looks every key up (GET /v1/sends?idempotency_key=) and
// returns the sends beyond one per key, and the keys with none.
func countSends(ctx context.Context, hc *http.Client, c config, keys []string) (dups, missing int, err error) {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for w := range min(c.concurrency, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(keys) || ctx.Err() != nil {
					return
				}
				n, err := sendsFor(ctx, hc, c.urls[(w+i)%len(c.urls)], c.key, keys[i])
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case n == 0:
					missing++
				default:
					dups += n - 1
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return 0, 0, fmt.Errorf("look sends up by key: %w", errors.Join(errs...))
	}
	return dups, missing, ctx.Err()
}

func sendsFor(ctx context.Context, hc *http.Client, base, apiKey, idemKey string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sends?limit=100&idempotency_key="+url.QueryEscape(idemKey), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, fmt.Errorf("GET /v1/sends: status %d (the key needs the read scope)", resp.StatusCode)
	}
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return 0, fmt.Errorf("GET /v1/sends: %w", err)
	}
	return len(list.Data), nil
}

// sinkCount says how many messages reached rcpt, how many of them repeated
// a Message-ID, and when the last arrived (zero if unknown).
type sinkCount func(rcpt string) (n, dups int, last time.Time)

// delivery sends new keys for c.duration to a recipient of its own, then
// waits (at most c.drainWait) until every accepted send reached the sink:
// DeliveredPerSecond is the messages at the sink over the time from the
// first request to the last arrival.
func delivery(ctx context.Context, c config, count sinkCount) (*result, error) {
	c.mode = "delivery"
	c.to = newKey() + "@example.com"
	start := time.Now()
	res, err := load(ctx, c)
	if err != nil {
		return nil, err
	}
	accepted := res.Sends
	var (
		n, dups int
		last    time.Time
	)
	waitFor(ctx, c.drainWait, func() bool {
		n, dups, last = count(c.to)
		if n >= accepted && last.IsZero() {
			last = time.Now()
		}
		return n >= accepted
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.Delivered = n
	if span := last.Sub(start); n > 0 && span > 0 {
		res.DeliveredPerSecond = float64(n) / span.Seconds()
	}
	dups = max(dups, n-accepted)
	res.Duplicates = &dups
	if n < accepted {
		res.Statuses["undelivered"] = accepted - n
		res.Errors += accepted - n
	}
	return res, nil
}

// waitFor polls done until it is true or the wait is over; it reports
// whether done came true.
func waitFor(ctx context.Context, wait time.Duration, done func() bool) bool {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	deadline := time.Now().Add(wait)
	for {
		if done() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
