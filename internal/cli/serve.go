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
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/delivery"
	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// shutdownGrace bounds how long in-flight requests and attempts may take to
// finish after SIGTERM.
const shutdownGrace = 25 * time.Second

func openStore(ctx context.Context, dsn string) (*sqlstore.Store, error) {
	return server.OpenStore(ctx, dsn)
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("serve", getenv, stderr)
	var cfg Config
	serverFlags(e, &cfg)
	if err := parse(e, args); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err := delivery.ValidateTransport(cfg.Transport); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	blog := newBufferedLog(stderr)
	defer blog.Close() // last: after the final log lines
	logger, err := newLogger(blog, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	logger = slog.New(flushOnWarn{Handler: logger.Handler(), b: blog})

	s, err := server.New(ctx, server.Config{
		DB: cfg.DB, Transport: cfg.Transport, From: cfg.From, IdempotencyTTL: cfg.IdempotencyTTL,
		RequireIdempotencyKey: cfg.RequireIdempotencyKey, RetryBase: cfg.RetryBase, MaxAttempts: cfg.MaxAttempts,
		AttemptLease: cfg.AttemptLease, Work: cfg.Role != "api", Workers: cfg.Workers, PollInterval: cfg.PollInterval,
		SecretKey: cfg.SecretKey, DNSResolver: cfg.DNSResolver, DBMaxConns: cfg.DBMaxConns, Retention: cfg.Retention, AuditRetention: cfg.AuditRetention, Redis: cfg.Redis,
		ReplayCache: replayCacheSize(cfg.ReplayCache), OutboundAllow: cfg.OutboundAllow,
		MaxRequestBytes: int64(cfg.MaxRequestSize), MaxMessageBytes: int64(cfg.MaxMessageSize),
		MaxInflightBytes: int64(cfg.MaxInflightBytes), AttachmentFetch: cfg.AttachmentFetch,
	}, logger)
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

	var srv *http.Server
	serveErr := make(chan error, 1)
	if cfg.Role != "worker" {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		srv = &http.Server{
			Handler:           s.Handler,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}
		logger.Info("listening", slog.String("addr", ln.Addr().String()), slog.String("db", redactDSN(cfg.DB)),
			slog.String("transport", redactTransport(cfg.Transport)), slog.String("role", cfg.Role), slog.String("version", version()))
		go func() { serveErr <- srv.Serve(ln) }()
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	if cfg.Role == "worker" {
		logger.Info("worker started", slog.String("db", redactDSN(cfg.DB)), slog.String("transport", redactTransport(cfg.Transport)))
	}

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-serveErr:
		runErr = fmt.Errorf("http server: %w", err)
	}
	// In-flight requests finish first (they may still enqueue), then the
	// workers stop taking jobs and finish their attempts.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if srv != nil {
		if err := srv.Shutdown(sctx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if err := s.Stop(sctx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("queue shutdown: %w", err))
	}
	logger.Info("stopped")
	return runErr
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

func redactTransport(t string) string {
	if t == "capture" || t == "mx" {
		return t
	}
	if i := strings.LastIndex(t, "@"); i >= 0 {
		return "smtp://xxxxx@" + t[i+1:]
	}
	return t
}

// replayCacheSize maps the flag (0 = off) onto server.Config's (0 = the
// default, negative = off).
func replayCacheSize(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
