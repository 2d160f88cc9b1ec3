package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// The quarantine routes (docs/api.md, "Quarantine"): what an inbox's rule
// kept from agents, released or deleted by an admin. Who sees it is
// app's rule (core.APIKey.MaySeeQuarantine); these only map HTTP.

// handleReleaseReceived is POST /v1/received/{id}/release: the message
// moves to the inbox, once; a repeat answers the message as it is.
func (s *Server) handleReleaseReceived(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	m, err := s.Svc.ReleaseReceived(ctx, tx, key, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, kit.ViewReceived(m, false), nil
}

// handleDeleteReceived is DELETE /v1/received/{id}.
func (s *Server) handleDeleteReceived(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.Svc.DeleteReceived(r.Context(), kit.APIKeyFrom(r.Context()), id)
	s.Answer(w, r, map[string]any{"id": id, "object": "received_message", "deleted": true}, err)
}
