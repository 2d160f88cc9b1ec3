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
// With --soak-provider ses the processes hand their mail to the SES
// emulator behind an HTTP fault proxy instead (see soak_provider.go).
//
// Mode smtp is an SMTP load client (see smtpload.go): --messages messages
// over --sessions sessions kept open, to sendonce's submission listener
// (AUTH PLAIN with --key) or any SMTP server (--key ""):
//
//	sendonce-bench --mode smtp --smtp-addr 127.0.0.1:2525 --key so_… --messages 20000 --sessions 20
//
// Every request goes to the 127.0.0.1-style addresses you give it or to the
// processes it started on 127.0.0.1; every phase is bounded by --duration
// or a count, and every wait by a timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
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

// flags are the settings that pick what run does besides c.
type flags struct {
	urls, sink, baseline, soakDir string
	soakProvider                  string
	seed                          uint64
	soakWorkers                   int
	smtp                          smtpLoad
	soakLegs                      soakLegFlags
}

// soakLegFlags turn the soak's mx and webhook legs off (--soak-mx=false,
// --soak-webhooks=false): without both, a seed runs as it did before the
// legs existed, the sink as the processes' --transport.
type soakLegFlags struct{ mx, hooks bool }

func parseFlags(args []string, stderr io.Writer) (config, flags, error) {
	fs := flag.NewFlagSet("sendonce-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var f flags
	fs.StringVar(&f.urls, "url", "http://127.0.0.1:8787", "comma-separated base URLs; requests are spread round robin")
	fs.StringVar(&c.key, "key", os.Getenv("SENDONCE_API_KEY"), "API key with the send and read scopes (env SENDONCE_API_KEY)")
	fs.StringVar(&c.mode, "mode", "new", "new, replay, storm, delivery (needs --spawn-api), all, smtp (the SMTP load client: needs --smtp-addr), or soak (the randomized fault soak: needs --db)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each mode sends")
	fs.IntVar(&c.concurrency, "concurrency", 32, "requests in flight")
	fs.IntVar(&c.replayKeys, "replay-keys", 200, "keys created before a replay run")
	fs.IntVar(&c.stormKeys, "storm-keys", 1000, "storm: at most this many keys, each sent --storm-dupes times at once")
	fs.IntVar(&c.stormDupes, "storm-dupes", 8, "storm: concurrent duplicates per key")
	fs.StringVar(&c.jsonFile, "json", "", "also write the rows as JSON to this file (- for standard output)")
	fs.IntVar(&c.spawnAPI, "spawn-api", 0, "start this many `sendonce serve --role api` processes (plus one worker) on --db; 1 on SQLite: one process in both roles")
	fs.StringVar(&c.db, "db", "", "database for --spawn-api (sqlite:PATH or postgres://…)")
	fs.StringVar(&c.binary, "sendonce", "sendonce", "the sendonce binary for --spawn-api")
	fs.StringVar(&f.sink, "sink", "", "only serve the built-in SMTP sink on this address (a relay for a server started by hand)")
	fs.StringVar(&f.baseline, "baseline", "", "only serve the yardstick — bare net/http answering a JSON POST — on this address, for wrk or this tool")
	fs.Uint64Var(&f.seed, "seed", 0, "soak: seed of the fault schedule (0: one from the clock, printed)")
	fs.IntVar(&f.soakWorkers, "soak-workers", 2, "soak on PostgreSQL: worker processes (API processes: --spawn-api, default 2)")
	fs.StringVar(&f.soakProvider, "soak-provider", "", "soak: ses hands the mail to the SES emulator (npm aws-ses-v2-local) behind an HTTP fault proxy instead of the SMTP sink")
	fs.BoolVar(&f.soakLegs.mx, "soak-mx", true, "soak: a send every 125ms goes through --transport mx to shaped destinations whose exchangers defer in windows (the others reach the sink through a mailbox relay)")
	fs.BoolVar(&f.soakLegs.hooks, "soak-webhooks", true, "soak: a webhook endpoint that fails in windows gets the send events; every one must arrive")
	fs.StringVar(&f.soakDir, "soak-dir", "", "soak: directory for the database file and the processes' logs (default: a new temporary one)")
	f.smtp.define(fs)
	err := fs.Parse(args)
	return c, f, err
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	switch {
	case c.mode == "soak":
		return soakMode(ctx, c, f.seed, f.soakWorkers, f.soakDir, f.soakProvider, f.soakLegs, stdout, stderr)
	case c.mode == "smtp":
		f.smtp.key = c.key
		return smtpMode(ctx, f.smtp, stdout)
	case f.baseline != "":
		return serveBaseline(ctx, f.baseline, stdout)
	case f.sink != "":
		return serveSink(ctx, f.sink, stdout)
	}
	c.urls = strings.Split(f.urls, ",")
	c.to = "bench@example.com"
	c.drainWait = deliveryWait
	todo, err := modesToRun(c, stderr)
	if err != nil {
		return err
	}
	var (
		sk *sink
		cl *cluster
	)
	if c.spawnAPI > 0 {
		transport := ""
		if slices.Contains(todo, "delivery") {
			if sk, err = startSink(); err != nil {
				return err
			}
			defer sk.close()
			transport = "smtp://" + sk.addr + "?tls=none"
		}
		if cl, err = spawn(ctx, c.binary, c.db, transport, c.spawnAPI); err != nil {
			return err
		}
		defer cl.stop()
		c.urls, c.key = cl.urls, cl.key
	}
	if c.key == "" {
		return errors.New("--key (or SENDONCE_API_KEY) is required")
	}
	rows, err := runModes(ctx, c, todo, sk, cl, stderr)
	if err != nil {
		return err
	}
	if err := printTable(stdout, rows); err != nil {
		return err
	}
	return writeJSON(c.jsonFile, stdout, rows)
}

// modesToRun checks c's bounds and returns the modes --mode names.
func modesToRun(c config, stderr io.Writer) ([]string, error) {
	if c.concurrency < 1 || c.replayKeys < 1 || c.stormKeys < 1 || c.stormDupes < 1 || c.duration <= 0 {
		return nil, errors.New("--concurrency, --replay-keys, --storm-keys, --storm-dupes and --duration must be positive")
	}
	switch {
	case c.mode == "all":
		if c.spawnAPI == 0 {
			fmt.Fprintln(stderr, "sendonce-bench: skipping delivery: it needs --spawn-api (the servers must relay to the built-in sink)")
			return modes[:3], nil
		}
		return modes, nil
	case c.mode == "delivery" && c.spawnAPI == 0:
		return nil, errors.New("--mode delivery needs --spawn-api: the servers must relay to the built-in SMTP sink")
	case !slices.Contains(modes, c.mode):
		return nil, fmt.Errorf("--mode %q: want new, replay, storm, delivery or all", c.mode)
	}
	return []string{c.mode}, nil
}

// runModes runs each mode in turn, one row each. sk and cl are the sink
// and the spawned servers, nil when there are none.
func runModes(ctx context.Context, c config, todo []string, sk *sink, cl *cluster, stderr io.Writer) ([]*result, error) {
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
			return nil, fmt.Errorf("mode %s: %w", m, err)
		}
		accepted += res.Sends
		if cl != nil {
			res.PeakRSSKiB = cl.peakRSSKiB()
		}
		rows = append(rows, res)
	}
	return rows, nil
}
