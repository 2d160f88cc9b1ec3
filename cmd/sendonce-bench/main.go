// Command sendonce-bench is sendonce's load tool. It drives POST /v1/send
// against one or more running servers, or starts them itself, and prints
// throughput and latency percentiles.
//
//	sendonce-bench --url http://127.0.0.1:8787 --key so_… --mode new --duration 10s
//	sendonce-bench --spawn-api 3 --db postgres://…/bench --mode new
//
// Every request goes to 127.0.0.1-style addresses you give it; the run is
// bounded by --duration.
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
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sendonce-bench:", err)
		os.Exit(1)
	}
}

type config struct {
	urls        []string
	key         string
	mode        string
	duration    time.Duration
	concurrency int
	replayKeys  int
	json        bool
	spawnAPI    int
	db          string
	binary      string
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sendonce-bench", flag.ContinueOnError)
	var c config
	var urls string
	fs.StringVar(&urls, "url", "http://127.0.0.1:8787", "comma-separated base URLs; requests are spread round robin")
	fs.StringVar(&c.key, "key", os.Getenv("SENDONCE_API_KEY"), "API key with the send scope (env SENDONCE_API_KEY)")
	fs.StringVar(&c.mode, "mode", "new", "new (a fresh Idempotency-Key per request) or replay (the same keys again)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to send")
	fs.IntVar(&c.concurrency, "concurrency", 32, "requests in flight")
	fs.IntVar(&c.replayKeys, "replay-keys", 200, "keys created before a replay run")
	fs.BoolVar(&c.json, "json", false, "print the result as JSON")
	fs.IntVar(&c.spawnAPI, "spawn-api", 0, "start this many `sendonce serve --role api` processes (plus one worker) on --db")
	fs.StringVar(&c.db, "db", "", "database for --spawn-api (sqlite:PATH or postgres://…)")
	fs.StringVar(&c.binary, "sendonce", "sendonce", "the sendonce binary for --spawn-api")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.urls = strings.Split(urls, ",")
	if c.mode != "new" && c.mode != "replay" {
		return fmt.Errorf("--mode %q: want new or replay", c.mode)
	}
	if c.spawnAPI > 0 {
		cl, err := spawn(ctx, c.binary, c.db, c.spawnAPI)
		if err != nil {
			return err
		}
		defer cl.stop()
		c.urls, c.key = cl.urls, cl.key
	}
	if c.key == "" {
		return errors.New("--key (or SENDONCE_API_KEY) is required")
	}
	res, err := load(ctx, c)
	if err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tservers\tconcurrency\trequests\treq/s\tp50\tp99\tp999\terrors")
	fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%d\n", res.Mode, res.Servers, res.Concurrency, res.Requests,
		res.PerSecond, ms(res.P50), ms(res.P99), ms(res.P999), res.Errors)
	return tw.Flush()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

type result struct {
	Mode        string         `json:"mode"`
	Servers     int            `json:"servers"`
	Concurrency int            `json:"concurrency"`
	Requests    int            `json:"requests"`
	Seconds     float64        `json:"seconds"`
	PerSecond   float64        `json:"per_second"`
	P50         time.Duration  `json:"p50_ns"`
	P99         time.Duration  `json:"p99_ns"`
	P999        time.Duration  `json:"p999_ns"`
	Errors      int            `json:"errors"`
	Statuses    map[string]int `json:"statuses"`
}

func newKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "bench-" + hex.EncodeToString(b[:])
}

const body = `{"to":"bench@example.com","subject":"Load test","text":"Hello from sendonce-bench."}`

func post(ctx context.Context, hc *http.Client, url, apiKey, idemKey string) (int, error) {
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

func load(ctx context.Context, c config) (*result, error) {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: c.concurrency, MaxConnsPerHost: c.concurrency,
	}}
	var keys []string
	if c.mode == "replay" {
		for i := range c.replayKeys {
			k := newKey()
			if st, err := post(ctx, hc, c.urls[i%len(c.urls)], c.key, k); err != nil || st != http.StatusOK {
				return nil, fmt.Errorf("prepare replay keys: status %d, %v", st, err)
			}
			keys = append(keys, k)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		statuses  = map[string]int{}
		n         atomic.Int64
		wg        sync.WaitGroup
	)
	start := time.Now()
	for w := range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			localStatus := map[string]int{}
			for i := 0; ctx.Err() == nil; i++ {
				seq := n.Add(1)
				url := c.urls[int(seq)%len(c.urls)]
				k := ""
				if c.mode == "replay" {
					k = keys[(w+i)%len(keys)]
				} else {
					k = newKey()
				}
				t0 := time.Now()
				st, err := post(ctx, hc, url, c.key, k)
				if ctx.Err() != nil {
					break // the run ended mid-request: not counted
				}
				local = append(local, time.Since(t0))
				if err != nil {
					localStatus["error"]++
				} else {
					localStatus[fmt.Sprint(st)]++
				}
			}
			mu.Lock()
			latencies = append(latencies, local...)
			for s, v := range localStatus {
				statuses[s] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))]
	}
	res := &result{Mode: c.mode, Servers: len(c.urls), Concurrency: c.concurrency, Requests: len(latencies),
		Seconds: elapsed.Seconds(), PerSecond: float64(len(latencies)) / elapsed.Seconds(),
		P50: pct(0.50), P99: pct(0.99), P999: pct(0.999), Statuses: statuses}
	for s, v := range statuses {
		if s != "200" {
			res.Errors += v
		}
	}
	return res, nil
}
