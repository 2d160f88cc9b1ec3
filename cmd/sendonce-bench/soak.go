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
	"sync"
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
	// mx runs the mx leg (soak_mx.go), hooks the webhook leg
	// (soak_webhook.go); hookDrain bounds the wait, after the sends are
	// judged, for the endpoint's last deliveries.
	mx, hooks bool
	hookDrain time.Duration
}

// deliverers is how many processes deliver: each shapes its own share.
func (c soakConfig) deliverers() int {
	if strings.HasPrefix(c.db, "sqlite:") {
		return 1
	}
	return c.workers
}

// sinkMailbox is the mailbox whose relay is the sink (through its proxy)
// when the mx leg makes mx the processes' --transport.
const sinkMailbox = "sink"

// soakLegs are the soak's legs beside the clients and the process
// faults; the ones that do not run are nil.
type soakLegs struct {
	sk   *sink
	ses  *sesLeg
	rl   *recvLeg
	mx   *mxLeg
	hook *hookLeg
}

// soakPGConns bounds each soak process's PostgreSQL connections.
const soakPGConns = 5

// soakMode checks the flags of --mode soak and runs it.
func soakMode(ctx context.Context, bc config, seed uint64, workers int, dir, provider string, legs soakLegFlags, stdout, stderr io.Writer) error {
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
		floors: soakFloors{Acked: 1, AtSink: 1, Faults: 1, Received: 1}, provider: provider,
		// The legs hand their mail to the sink soak's processes; the
		// provider soak keeps SES as its one transport.
		mx: legs.mx && provider == "", hooks: legs.hooks && provider == "", hookDrain: 90 * time.Second}
	if c.mx {
		c.floors.MXDelivered = 1
	}
	if c.hooks {
		c.floors.WebhookEvents = 1
	}
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
	kit := newKitT(logger)
	defer kit.close() // after the processes are stopped (deferred below)
	lg, transport, extra, err := startLegs(c, kit, inj, logger)
	if err != nil {
		return err
	}
	defer func() { lg.close() }() // lg.rl comes later
	sdb, err := setUpSoakDB(ctx, c, logger)
	if err != nil {
		return err
	}
	defer func() { sdb.close(err != nil) }()
	inj.pgPx = sdb.px
	var apiNodes []*node
	inj.nodes, apiNodes = soakNodes(c, sdb.url, transport, sdb.pg, extra)
	if lg.rl, err = newRecvLeg(c.seed, apiNodes); err != nil {
		return err
	}
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
	cl := newClients(apiKey, apiNodes, c.seed, time.Now(), c.clients)
	cl.mx = c.mx
	if err := setUpTenant(ctx, cl, lg, inj.smtpPx.Addr); err != nil {
		return err
	}
	start := time.Now()
	inj.start, rep.Started, cl.start = start, start.UTC().Format("2006-01-02T15:04:05.000Z"), start
	lg.sk.setStart(start)
	logger.Info("soak started", slog.Uint64("seed", c.seed), slog.Duration("duration", c.duration),
		slog.String("db", rep.Database), slog.String("dir", c.dir), slog.Int("faults", len(inj.sched)),
		slog.Bool("mx", c.mx), slog.Bool("webhooks", c.hooks))
	inj.soakPhase(ctx, c, cl, lg)
	if err := ctx.Err(); err != nil {
		return err
	}
	logger.Info("clients done; waiting for quiescence", slog.Int("keys", len(cl.logicals())))
	if err := check(ctx, c, cl, lg, rep, logger); err != nil {
		return fmt.Errorf("%w (seed %d; logs in %s)", err, c.seed, c.dir)
	}
	stopNodes(inj.nodes, logger) // a race-enabled process's reports are in its log by the time it exits
	countRaces(inj.nodes, rep)
	rep.Faults, rep.Requests = inj.figures(), cl.statusFigures()
	rep.countServerErrors()
	rep.Applied, rep.MaxFaultLate = inj.appliedFaults()
	lg.figures(rep, c.duration)
	return reportSoak(c, rep, jsonFile, stdout)
}

// startLegs starts the sink and its proxy, SES (the provider soak), the
// soak's resolver and the mx and webhook legs; it returns them, the
// processes' --transport and their other flags for the legs.
func startLegs(c soakConfig, kit *kitT, inj *injector, logger *slog.Logger) (lg soakLegs, transport string, extra []string, err error) {
	defer func() {
		if err != nil {
			lg.close()
		}
	}()
	if lg.sk, err = startSink(); err != nil {
		return lg, "", nil, err
	}
	lg.sk.faults = &sinkFaults{pick: inj.pick, late: c.lease}
	if inj.smtpPx, err = tcpproxy.Start(lg.sk.addr, newStream(c.seed, "smtp proxy").chance); err != nil {
		return lg, "", nil, err
	}
	transport = "smtp://" + inj.smtpPx.Addr + "?tls=none"
	if c.provider == "ses" {
		if inj.ses, err = startSESLeg(c.seed); err != nil {
			return lg, "", nil, err
		}
		lg.ses, transport = inj.ses, inj.ses.transport()
	}
	var records []string
	if c.mx {
		if lg.mx, err = startMXLeg(kit, c.seed, c.dir, c.duration, logger); err != nil {
			return lg, "", nil, err
		}
		records, transport, extra = mxRecords(), "mx", lg.mx.args()
	}
	dns, err := startDNS(kit, records)
	if err != nil {
		return lg, "", nil, err
	}
	extra = append(extra, "--dns-resolver", dns)
	if c.hooks {
		if lg.hook, err = startHookLeg(c.seed, c.duration, logger); err != nil {
			return lg, "", nil, err
		}
		extra = append(extra, lg.hook.args()...)
	}
	return lg, transport, extra, nil
}

// close stops what startLegs started (the test servers go with kit).
func (lg soakLegs) close() {
	if lg.hook != nil {
		lg.hook.close()
	}
	if lg.rl != nil {
		lg.rl.close()
	}
	if lg.ses != nil {
		lg.ses.close()
	}
	if lg.sk != nil {
		lg.sk.close()
	}
}

// setUpTenant makes what the soak's tenant needs before the faults begin:
// the receiving inbox; with the mx leg the mailbox whose relay is the sink
// (smtpAddr, its proxy); with the webhook leg the endpoint's webhook.
func setUpTenant(ctx context.Context, cl *clients, lg soakLegs, smtpAddr string) error {
	if err := lg.rl.createInbox(ctx, cl); err != nil {
		return err
	}
	if lg.mx != nil {
		body := fmt.Sprintf(`{"id":%q,"address":"soak@sink.soak.test","transport":"smtp://%s?tls=none"}`, sinkMailbox, smtpAddr)
		if _, err := cl.setUp(ctx, "/v1/mailboxes", "soak-mailbox", body); err != nil {
			return err
		}
	}
	if lg.hook != nil {
		return lg.hook.create(ctx, cl)
	}
	return nil
}

// figures adds the legs' own figures to rep.
func (lg soakLegs) figures(rep *soakReport, duration time.Duration) {
	if lg.mx != nil {
		rep.MX.Windows = lg.mx.windowCounts()
	}
	if lg.hook != nil {
		rep.Webhooks.Windows = lg.hook.windowCounts(duration)
	}
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
// c.giveUp more) and the faults and the legs' windows beside them, then
// heals every fault and waits for the clients.
func (in *injector) soakPhase(ctx context.Context, c soakConfig, cl *clients, lg soakLegs) {
	faultCtx, stopFaults := context.WithTimeout(ctx, c.duration)
	defer stopFaults()
	newCtx, stopNew := context.WithTimeout(ctx, c.duration)
	defer stopNew()
	giveCtx, stopGive := context.WithTimeout(ctx, c.duration+c.giveUp)
	defer stopGive()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		cl.run(newCtx, giveCtx, c.clients)
	}()
	go func() {
		defer wg.Done()
		lg.rl.run(newCtx, giveCtx)
	}()
	if lg.hook != nil {
		lg.hook.run(in.start)
	}
	windows := make(chan struct{})
	go func() {
		defer close(windows)
		if lg.mx != nil {
			lg.mx.run(faultCtx, in.start)
		}
	}()
	in.run(faultCtx)
	<-windows
	in.logger.Info("healing")
	in.heal(ctx)
	if lg.mx != nil {
		lg.mx.heal()
	}
	if lg.hook != nil {
		lg.hook.heal()
	}
	wg.Wait()
}

// soakNodes returns the processes of the soak, every one and those that
// serve the API: on SQLite one in both roles, on PostgreSQL c.workers
// workers (first: one migrates the empty database) and c.apis API
// processes. db is the database URL they use, transport their transport
// (the sink's proxy, SES's, or mx), extra the legs' flags.
func soakNodes(c soakConfig, db, transport string, pg bool, extra []string) (all, api []*node) {
	common := []string{"--db", db, "--transport", transport,
		"--attempt-lease", c.lease.String(), "--retry-base", "200ms", "--max-attempts", "10",
		"--poll-interval", "50ms", "--log-level", "info"}
	common = append(common, extra...)
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
