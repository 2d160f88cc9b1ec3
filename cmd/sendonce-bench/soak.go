package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/internal/testkit/tcpproxy"
)

// soakConfig is the soak mode's settings (--mode soak).
type soakConfig struct {
	bin      string
	db       string // sqlite:PATH, or a postgres:// URL of a server the soak may create a database on
	duration time.Duration
	seed     uint64
	clients  int
	apis     int // PostgreSQL: API processes (SQLite: one process in both roles)
	workers  int // PostgreSQL: worker processes
	dir      string
	lease    time.Duration
	// settle bounds the wait, after the heal, for every send to leave
	// queued and sending; giveUp the clients' last retries.
	settle time.Duration
	giveUp time.Duration
	floors soakFloors
	// provider is "ses" for the provider soak: the processes hand their
	// mail to the SES emulator behind an HTTP fault proxy instead of the
	// SMTP sink ("": the sink).
	provider string
}

// soakPGConns bounds each soak process's PostgreSQL connections.
const soakPGConns = 5

// soakMode checks the flags of --mode soak and runs it.
func soakMode(ctx context.Context, bc config, seed uint64, workers int, dir, provider string, stdout, stderr io.Writer) error {
	if bc.db == "" {
		return errors.New("--mode soak needs --db (sqlite:PATH, or a postgres:// URL on which it may create a database)")
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	apis := bc.spawnAPI
	if apis <= 0 {
		apis = 2
	}
	if bc.duration <= 0 || bc.concurrency < 1 || workers < 1 {
		return errors.New("--duration, --concurrency and --soak-workers must be positive")
	}
	if provider != "" && provider != "ses" {
		return fmt.Errorf("--soak-provider %q: only ses", provider)
	}
	c := soakConfig{bin: bc.binary, db: bc.db, duration: bc.duration, seed: seed, clients: bc.concurrency,
		apis: apis, workers: workers, dir: dir, lease: 3 * time.Second, settle: 3 * time.Minute, giveUp: 30 * time.Second,
		// By hand, at least something must have happened; TestSoak sets
		// floors measured for its minute.
		floors: soakFloors{Acked: 1, AtSink: 1, Faults: 1, Received: 1}, provider: provider}
	if c.dir == "" && strings.HasPrefix(bc.db, "sqlite:") {
		c.dir = filepath.Dir(strings.TrimPrefix(bc.db, "sqlite:"))
	}
	return runSoak(ctx, c, bc.jsonFile, stdout, stderr)
}

// runSoak runs the randomized fault soak and reports; it returns an error
// when a check failed or the soak did too little to count.
func runSoak(ctx context.Context, c soakConfig, jsonFile string, stdout, stderr io.Writer) (err error) {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if c.dir, err = soakDir(c.dir); err != nil {
		return err
	}
	inj := &injector{sinkRNG: newStream(c.seed, "sink"), logger: logger, counts: map[string]int{}}
	sk, err := startSink()
	if err != nil {
		return err
	}
	defer sk.close()
	sk.faults = &sinkFaults{pick: inj.pick, late: c.lease}
	smtpPx, err := tcpproxy.Start(sk.addr, newStream(c.seed, "smtp proxy").chance)
	if err != nil {
		return err
	}
	defer smtpPx.Close()
	inj.smtpPx = smtpPx
	transport := "smtp://" + smtpPx.Addr + "?tls=none"
	if c.provider == "ses" {
		if inj.ses, err = startSESLeg(c.seed); err != nil {
			return err
		}
		defer inj.ses.close()
		transport = inj.ses.transport()
	}
	sdb, err := setUpSoakDB(ctx, c, logger)
	if err != nil {
		return err
	}
	defer func() { sdb.close(err != nil) }()
	inj.pgPx = sdb.px
	var apiNodes []*node
	inj.nodes, apiNodes = soakNodes(c, sdb.url, transport, sdb.pg)
	rl, err := newRecvLeg(c.seed, apiNodes)
	if err != nil {
		return err
	}
	defer rl.close()
	defer stopNodes(inj.nodes, logger) // on the way out of a failure; stopping twice is harmless
	rep := &soakReport{Database: strings.SplitN(c.db, ":", 2)[0], Seed: c.seed, Duration: c.duration.String(), Provider: c.provider}
	apiKey, err := startNodes(ctx, c, inj.nodes, sdb.direct, rep)
	if err != nil {
		return err
	}
	kinds := faultKinds(sdb.pg)
	if inj.ses != nil {
		kinds = providerFaultKinds(sdb.pg)
	}
	inj.sched = drawSchedule(newStream(c.seed, "schedule"), kinds, len(inj.nodes), c.lease, c.duration)
	start := time.Now()
	inj.start, rep.Started = start, start.UTC().Format("2006-01-02T15:04:05.000Z")
	sk.setStart(start)
	logger.Info("soak started", slog.Uint64("seed", c.seed), slog.Duration("duration", c.duration),
		slog.String("db", rep.Database), slog.String("dir", c.dir), slog.Int("faults", len(inj.sched)))
	cl := newClients(apiKey, apiNodes, c.seed, start, c.clients)
	if err := rl.createInbox(ctx, cl); err != nil {
		return err
	}
	inj.soakPhase(ctx, c, cl, rl)
	if err := ctx.Err(); err != nil {
		return err
	}
	logger.Info("clients done; waiting for quiescence", slog.Int("keys", len(cl.logicals())))
	if err := check(ctx, c, cl, sk, inj.ses, rl, rep, logger); err != nil {
		return fmt.Errorf("%w (seed %d; logs in %s)", err, c.seed, c.dir)
	}
	stopNodes(inj.nodes, logger) // a race-enabled process's reports are in its log by the time it exits
	countRaces(inj.nodes, rep)
	rep.Faults, rep.Requests = inj.figures(), cl.statusFigures()
	rep.Applied, rep.MaxFaultLate = inj.appliedFaults()
	return reportSoak(c, rep, jsonFile, stdout)
}

// faultKinds are the faults a soak draws from: on PostgreSQL also a cut
// of every database connection.
func faultKinds(pg bool) []string {
	kinds := []string{faultKill, faultStop, faultSink451, faultSink550, faultHangUp, faultLate, faultDropReply}
	if pg {
		kinds = append(kinds, faultPGCut)
	}
	return kinds
}

// startNodes starts the soak's processes and makes its API key.
func startNodes(ctx context.Context, c soakConfig, nodes []*node, directDB string, rep *soakReport) (string, error) {
	for _, n := range nodes {
		if err := n.start(ctx); err != nil {
			return "", err
		}
		rep.Processes = append(rep.Processes, n.name)
	}
	out, err := exec.CommandContext(ctx, c.bin, "keys", "create", "--db", directDB, "--name", "soak", "--scopes", "send,read,admin").Output()
	if err != nil {
		return "", fmt.Errorf("keys create: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// stopNodes stops every process gracefully (see node.term).
func stopNodes(nodes []*node, logger *slog.Logger) {
	for _, n := range nodes {
		if err := n.term(); err != nil {
			logger.Warn("stop", slog.Any("error", err))
		}
	}
}

// soakDir is the soak's directory (dir, or a new temporary one), made.
func soakDir(dir string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "sendonce-soak-")
		if err != nil {
			return "", err
		}
		dir = d
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// soakDB is the soak's database: url as the processes reach it (on
// PostgreSQL through the fault proxy, which in.pgPx cuts) and direct for
// the keys command.
type soakDB struct {
	url, direct string
	pg          bool
	px          *tcpproxy.Proxy
	drop        func()
	logger      *slog.Logger
}

// setUpSoakDB makes the soak's database: on SQLite c.db itself, on
// PostgreSQL a fresh one behind a fault proxy (faultPGCut then joins the
// schedule).
func setUpSoakDB(ctx context.Context, c soakConfig, logger *slog.Logger) (*soakDB, error) {
	if strings.HasPrefix(c.db, "sqlite:") {
		return &soakDB{url: c.db, direct: c.db}, nil
	}
	direct, drop, err := createSoakDatabase(ctx, c.db, c.seed)
	if err != nil {
		return nil, err
	}
	d := &soakDB{direct: direct, pg: true, drop: drop, logger: logger}
	u, _ := url.Parse(direct)
	if d.px, err = tcpproxy.Start(u.Host, newStream(c.seed, "postgres proxy").chance); err != nil {
		d.close(true)
		return nil, err
	}
	u.Host = d.px.Addr
	d.url = u.String()
	return d, nil
}

// close stops the proxy and drops the database, unless the soak failed: a
// failed soak keeps its database for a look.
func (d *soakDB) close(failed bool) {
	if !d.pg {
		return
	}
	if d.px != nil {
		d.px.Close()
	}
	if failed {
		d.logger.Warn("soak database kept", slog.String("db", d.direct))
		return
	}
	d.drop()
}

// soakPhase runs the clients for c.duration (their last retries up to
// c.giveUp more) and the faults beside them, then heals every fault and
// waits for the clients.
func (in *injector) soakPhase(ctx context.Context, c soakConfig, cl *clients, rl *recvLeg) {
	faultCtx, stopFaults := context.WithTimeout(ctx, c.duration)
	defer stopFaults()
	newCtx, stopNew := context.WithTimeout(ctx, c.duration)
	defer stopNew()
	giveCtx, stopGive := context.WithTimeout(ctx, c.duration+c.giveUp)
	defer stopGive()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl.run(newCtx, giveCtx, c.clients)
	}()
	received := make(chan struct{})
	go func() {
		defer close(received)
		rl.run(newCtx, giveCtx)
	}()
	in.run(faultCtx)
	in.logger.Info("healing")
	in.heal(ctx)
	<-done
	<-received
}

// soakNodes returns the processes of the soak, every one and those that
// serve the API: on SQLite one in both roles, on PostgreSQL c.workers
// workers (first: one migrates the empty database) and c.apis API
// processes. db is the database URL they use, transport their transport
// (the sink's proxy, or SES's).
func soakNodes(c soakConfig, db, transport string, pg bool) (all, api []*node) {
	common := []string{"--db", db, "--transport", transport,
		"--attempt-lease", c.lease.String(), "--retry-base", "200ms", "--max-attempts", "10",
		"--poll-interval", "50ms", "--log-level", "info"}
	if !pg {
		n := newNode("all", "all", c.bin, c.dir, common)
		return []*node{n}, []*node{n}
	}
	// The PostgreSQL server may be shared: a few connections each.
	common = append(common, "--db-max-conns", fmt.Sprint(soakPGConns))
	for i := range c.workers {
		all = append(all, newNode(fmt.Sprintf("worker%d", i+1), "worker", c.bin, c.dir, common))
	}
	for i := range c.apis {
		n := newNode(fmt.Sprintf("api%d", i+1), "api", c.bin, c.dir, common)
		all, api = append(all, n), append(api, n)
	}
	return all, api
}

// createSoakDatabase makes a fresh database on the server of admin for
// this soak; cleanup drops it.
func createSoakDatabase(ctx context.Context, admin string, seed uint64) (string, func(), error) {
	name := fmt.Sprintf("sendonce_soak_%d_%d", seed, time.Now().UnixNano())
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("soak: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(cctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("soak: create database: %w", err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	cleanup := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(dctx, admin); err == nil {
			_, _ = c.Exec(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			c.Close(dctx)
		}
	}
	return u.String(), cleanup, nil
}

var errNoAPI = errors.New("no API process is up")
