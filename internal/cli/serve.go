package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/delivery"
	"github.com/sendonce/sendonce/internal/httpapi"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// shutdownGrace bounds how long in-flight requests and attempts may take to
// finish after SIGTERM.
const shutdownGrace = 25 * time.Second

func openStore(ctx context.Context, dsn string) (*sqlstore.Store, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return nil, errors.New("PostgreSQL is not supported by this build yet; use --db sqlite:PATH")
	}
	path, err := sqlstore.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return sqlstore.Open(ctx, path)
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
	logger, err := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}

	store, err := openStore(ctx, cfg.DB)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	if err := delivery.MigrateSQLite(ctx, store.W); err != nil {
		return err
	}

	m := metrics.New(store.QueueDepth)
	svc := app.New(store, app.Config{DefaultFrom: cfg.From}, logger)
	d, err := delivery.NewDeliverer(svc, delivery.Config{
		DefaultTransport: cfg.Transport, RetryBase: cfg.RetryBase, MaxAttempts: cfg.MaxAttempts, AttemptLease: cfg.AttemptLease,
	}, m, logger)
	if err != nil {
		return err
	}
	work := cfg.Role != "api"
	q, err := delivery.NewSQLiteQueue(store.W, d, delivery.QueueConfig{Work: work, Workers: cfg.Workers, PollInterval: cfg.PollInterval}, logger)
	if err != nil {
		return err
	}
	store.SetEnqueuer(q.Enqueue)

	var srv *http.Server
	serveErr := make(chan error, 1)
	if cfg.Role != "worker" {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		srv = &http.Server{
			Handler: httpapi.NewServer(svc, m, httpapi.Config{
				RequireIdempotencyKey: cfg.RequireIdempotencyKey, IdempotencyTTL: cfg.IdempotencyTTL, ReservationLease: cfg.AttemptLease,
			}, logger),
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
	if err := q.Start(ctx); err != nil {
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
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if srv != nil {
		if err := srv.Shutdown(sctx); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if err := q.Stop(sctx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("queue shutdown: %w", err))
	}
	logger.Info("stopped")
	return runErr
}

func redactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return dsn
	}
	return "(redacted)"
}

func redactTransport(t string) string {
	if t == "capture" || t == "mx" {
		return t
	}
	if i := strings.Index(t, "@"); i >= 0 {
		return "smtp://xxxxx@" + t[i+1:]
	}
	return t
}
