package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sendonce/sendonce/internal/accesslog"
	"github.com/sendonce/sendonce/internal/certs"
	"github.com/sendonce/sendonce/internal/lifecycle"
	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/internal/transport"
)

// defaultShutdownGrace is the least time in-flight requests and attempts
// get to finish after SIGTERM (the fixed grace of earlier versions).
const defaultShutdownGrace = 25 * time.Second

// shutdownGrace is --shutdown-grace, or when that is 0 the larger of
// defaultShutdownGrace and --attempt-lease: an attempt may run for up to
// its lease, and one cut at shutdown after DATA began ends unknown.
func (c *Config) shutdownGrace() time.Duration {
	if c.ShutdownGrace > 0 {
		return c.ShutdownGrace
	}
	return max(defaultShutdownGrace, c.Server.AttemptLease)
}

func openStore(ctx context.Context, dsn string) (*sqlstore.Store, error) {
	return server.OpenStore(ctx, dsn)
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, spec, err := parseServe(args, getenv, stderr)
	if err != nil {
		return err
	}
	blog := newBufferedLog(stderr)
	defer blog.Close() // last: after the final log lines
	logger, err := newLogger(blog, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	logger = slog.New(flushOnWarn{Handler: logger.Handler(), b: blog})
	for _, w := range cfg.Providers.warnings() {
		logger.Warn(w)
	}
	sc, certSet, err := cfg.serverConfig()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if len(certSet) > 0 {
		defer reloadOnHangup(certSet, logger)()
	}
	sc.AccessLog = accessLog(logger, blog, cfg.LogFormat, cfg.AccessLogSample)
	tp, stopTracing, err := tracing.Setup(ctx, getenv, version())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	// After the server's Close below: the last attempts' spans are
	// flushed, within a bound of their own.
	defer flushTraces(ctx, stopTracing, logger)
	sc.TracerProvider = tp
	s, err := server.New(ctx, sc, logger)
	if err != nil {
		return err
	}
	// Last: ends the relays' pooled sessions (QUIT) and closes the
	// database, after the workers stopped below.
	defer func() { _ = s.Close(context.WithoutCancel(ctx)) }()

	if cfg.Pprof != "" {
		stopPprof, err := startPprof(cfg.Pprof, logger)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	srv, serveErr := addWaysIn(&cfg, s, spec, logger)
	ops, err := serveOps(cfg.OpsAddr, s.Ops, logger)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	if cfg.Role == "worker" {
		logger.Info("worker started", slog.String("db", redactDSN(cfg.Server.DB)), slog.String("transport", spec.Redacted()))
	}
	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-serveErr:
		runErr = fmt.Errorf("http server: %w", err)
	}
	s.Drain()
	if runErr == nil {
		drain(srv, cfg.DrainDelay, logger)
	}
	runErr = errors.Join(runErr, shutdown(ctx, s, cfg.shutdownGrace()))
	if ops != nil {
		// Last: probes see the worker draining until its attempts ended.
		runErr = errors.Join(runErr, ops.Close())
	}
	logger.Info("stopped")
	return runErr
}

// parseServe reads serve's flags and checks them; a bad one is ErrUsage.
func parseServe(args []string, getenv func(string) string, stderr io.Writer) (Config, transport.Spec, error) {
	e := newFlags("serve", getenv, stderr)
	var cfg Config
	serverFlags(e, &cfg)
	if err := parse(e, args); err != nil {
		return cfg, transport.Spec{}, err
	}
	if err := cfg.validate(); err != nil {
		return cfg, transport.Spec{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	spec, err := transport.ParseSpec(cfg.Server.Transport)
	if err != nil {
		return cfg, transport.Spec{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return cfg, spec, nil
}

// serverConfig is the server's config from the flags: cfg.Server, and
// what the CLI's own flags say in server terms.
// accessLog writes the API's request lines straight into the log buffer,
// in the logger's format, when INFO lines are logged at all
// (internal/accesslog says why), one in sample of those below 400.
func accessLog(logger *slog.Logger, blog *bufferedLog, format string, sample int) accesslog.Logger {
	fallback := accesslog.Slog{L: logger}
	if !logger.Enabled(context.Background(), slog.LevelInfo) {
		return fallback
	}
	var l accesslog.Logger = flushOnServerError{Logger: accesslog.Direct{W: blog, JSON: format == "json", Fallback: fallback}, b: blog}
	if sample > 1 {
		l = &accesslog.Sampled{Logger: l, Every: uint64(sample)}
	}
	return l
}

// The certificates of the TLS listeners come back as a set that SIGHUP
// reloads (empty without any).
func (c *Config) serverConfig() (server.Config, certs.Set, error) {
	smtpCfg, smtpCert, err := c.SMTP.submissionConfig()
	if err != nil {
		return server.Config{}, nil, err
	}
	var set certs.Set
	if smtpCert != nil {
		set = append(set, smtpCert)
	}
	sc := c.Server
	if err := c.Providers.apply(&sc); err != nil {
		return server.Config{}, nil, err
	}
	sc.Work = c.Role != "api"
	sc.Version = version()
	sc.ReplayCache = replayCacheSize(c.ReplayCache)
	sc.Caps = c.caps()
	sc.SMTP = smtpCfg
	sc.SMTP.MaxMessageBytes = int64(c.MaxMessageSize) // one limit for every route in
	sc.MaxRequestBytes, sc.MaxMessageBytes = int64(c.MaxRequestSize), int64(c.MaxMessageSize)
	sc.MaxInflightBytes, sc.AttachmentFetch = int64(c.MaxInflightBytes), c.AttachmentFetch
	if (c.InboundTLSCert == "") != (c.InboundTLSKey == "") {
		return server.Config{}, nil, fmt.Errorf("--inbound-tls-cert and --inbound-tls-key go together")
	}
	if c.InboundTLSCert != "" {
		pair, err := certs.Load("inbound", c.InboundTLSCert, c.InboundTLSKey)
		if err != nil {
			return server.Config{}, nil, fmt.Errorf("--inbound-tls-cert: %w", err)
		}
		sc.InboundTLS = pair.ServerConfig()
		set = append(set, pair)
	}
	sc.InboundLimits.MaxMemory = int64(c.InboundMaxMemory)
	sc.MaxReceivedBytes = int64(c.MaxReceivedStorage)
	if sc.MaxReceivedBytes == 0 {
		sc.MaxReceivedBytes = -1 // the flag's "no cap"
	}
	return sc, set, nil
}

// addWaysIn puts the ways in, HTTP and SMTP submission, on the process's
// start list (after the workers and the inbound listener, stopped before
// them), unless this process is a worker (then srv is nil). The end of
// their Serve is sent on serveErr.
func addWaysIn(cfg *Config, s *server.Server, spec transport.Spec, logger *slog.Logger) (srv *http.Server, serveErr <-chan error) {
	errs := make(chan error, 1)
	if cfg.Role == "worker" {
		return nil, errs
	}
	srv = &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if s.Dashboard != nil {
		srv.RegisterOnShutdown(s.Dashboard.Close) // its live streams would hold the shutdown
	}
	s.Add("http", lifecycle.Funcs{
		OnStart: func(context.Context) error { return listen(*cfg, srv, logger, spec, errs) },
		OnStop: func(ctx context.Context) error {
			if err := srv.Shutdown(ctx); err != nil {
				return fmt.Errorf("http shutdown: %w", err)
			}
			return nil
		},
	})
	s.Add("smtp", lifecycle.Funcs{
		OnStart: func(context.Context) error { return startSMTP(&cfg.SMTP, s.Submission, logger, errs) },
		OnStop:  s.Submission.Shutdown,
	})
	return srv, errs
}

// serveOps starts the --ops-addr listener (nil without one). A failure
// of its Serve after the start is logged: the process's work goes on.
func serveOps(addr string, h http.Handler, logger *slog.Logger) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen --ops-addr: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	logger.Info("ops listening", slog.String("addr", ln.Addr().String()))
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("ops listener", slog.Any("error", err))
		}
	}()
	return srv, nil
}

// listen starts srv on cfg.Addr; Serve's end is sent on serveErr.
func listen(cfg Config, srv *http.Server, logger *slog.Logger, spec transport.Spec, serveErr chan<- error) error {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	logger.Info("listening", slog.String("addr", ln.Addr().String()), slog.String("db", redactDSN(cfg.Server.DB)),
		slog.String("transport", spec.Redacted()), slog.String("role", cfg.Role), slog.String("version", version()))
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	return nil
}

// drain keeps the API serving for delay after GET /readyz turned 503, so
// that load balancers take the process out of rotation before its
// listener closes; a second SIGTERM or SIGINT cuts it short. Keep-alives
// end meanwhile: each client's next request opens a new connection,
// which the balancer sends elsewhere. srv is nil in the worker role, which
// no balancer sends requests to.
func drain(srv *http.Server, delay time.Duration, logger *slog.Logger) {
	if srv == nil || delay <= 0 {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	srv.SetKeepAlivesEnabled(false)
	logger.Info("draining", slog.Duration("delay", delay))
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-sig:
		logger.Info("draining cut short by a second signal")
	}
}

// reloadOnHangup reloads every certificate of set on SIGHUP until the
// returned stop is called. Installed only when there are certificates: a
// process without any keeps SIGHUP's default.
func reloadOnHangup(set certs.Set, logger *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-hup:
				set.Reload(logger)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-stopped
	}
}

// shutdown stops the process's parts in the reverse of their start
// (server.Server.Stop): in-flight requests and SMTP sessions finish first
// (they may still enqueue), then the workers stop taking jobs and their
// attempts end, all within shutdownGrace.
func shutdown(ctx context.Context, s *server.Server, grace time.Duration) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	return s.Stop(sctx)
}

// traceFlushTimeout bounds the export of the spans left at shutdown: a
// collector that does not answer must not hold the process.
const traceFlushTimeout = 5 * time.Second

// flushTraces exports the spans still buffered and stops the exporter.
func flushTraces(ctx context.Context, stop tracing.Shutdown, logger *slog.Logger) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
	defer cancel()
	if err := stop(fctx); err != nil {
		logger.Warn("flushing traces at shutdown", slog.Any("error", err))
	}
}

func redactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// replayCacheSize maps the flag (0 = off) onto server.Config's (0 = the
// default, negative = off).
func replayCacheSize(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
