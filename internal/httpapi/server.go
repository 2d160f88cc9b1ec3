package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/metrics"
)

// Server is the HTTP API: the native routes on the shared plumbing (Base),
// with the route table that also serves the compatibility floors.
type Server struct {
	*kit.Base
	mux *http.ServeMux
}

// NewServer returns the API as an http.Handler.
func NewServer(svc *app.Service, m *metrics.Metrics, cfg kit.Config, logger *slog.Logger) http.Handler {
	s := newServer(svc, m, cfg, logger)
	s.routes()
	return s.LogRequests(s.mux)
}

// NewOps returns what an operator's probes and scrapers ask of any
// process, the API's or a worker's: GET /healthz, GET /readyz and
// GET /metrics, and nothing else (--ops-addr).
func NewOps(svc *app.Service, m *metrics.Metrics, cfg kit.Config, logger *slog.Logger) http.Handler {
	s := newServer(svc, m, cfg, logger)
	s.mux.HandleFunc("GET /healthz", s.handleHealthz)
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	if m != nil {
		s.mux.Handle("GET /metrics", m.Handler())
	}
	return s.mux
}

func newServer(svc *app.Service, m *metrics.Metrics, cfg kit.Config, logger *slog.Logger) *Server {
	return &Server{mux: http.NewServeMux(), Base: kit.NewBase(svc, m, cfg, logger)}
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	if err := s.Reads.Ping(r.Context()); err != nil {
		s.Logger.ErrorContext(r.Context(), "health check", "error", err)
		kit.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": "unreachable", "version": s.Cfg.Version})
		return
	}
	kit.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "database": "ok", "version": s.Cfg.Version})
}

// handleReadyz answers whether a load balancer should send this process
// traffic. Unlike /healthz (is the process alive), it turns 503 while the
// process starts and drains, so that it is taken out of rotation without
// being restarted.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	var reason string
	if s.Cfg.Ready != nil {
		reason = s.Cfg.Ready(r.Context())
	} else if err := s.Reads.Ping(r.Context()); err != nil {
		s.Logger.WarnContext(r.Context(), "not ready", "reason", kit.NotReadyDatabase, "error", err)
		reason = kit.NotReadyDatabase
	}
	w.Header().Set("Cache-Control", "no-store")
	if reason != "" {
		kit.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "reason": reason})
		return
	}
	kit.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// handleNotFound answers what no route matched, in the API's error shape:
// 405 with Allow when the path exists for other methods, else 404.
func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != notFoundPattern {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		kit.WriteError(w, r, s.Logger, kit.ApiError(kit.CodeMethodNotAllow, "", fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)))
		return
	}
	kit.WriteError(w, r, s.Logger, core.Errorf(core.CodeNotFound, "", "no route %s %s", r.Method, r.URL.Path))
}
