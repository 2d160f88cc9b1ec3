package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofHandler serves the runtime profiles under /debug/pprof/ on a mux of
// its own: the API's handler never carries them.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// startPprof serves pprofHandler on addr (--pprof) until stop is called.
// Profiles show memory contents, so addr should be a loopback address.
func startPprof(addr string, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: listen: %w", err)
	}
	srv := &http.Server{
		Handler:           pprofHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		// A CPU profile or trace runs for ?seconds= (30 by default).
		WriteTimeout: 2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Warn("pprof serving profiles; do not expose this address", slog.String("pprof_addr", ln.Addr().String()))
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
