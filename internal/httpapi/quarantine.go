package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
)

// The quarantine routes (docs/api.md, "Quarantine"): what an inbox's rule
// kept from agents, released or deleted by an admin. Who sees it is
// app's rule (core.APIKey.MaySeeQuarantine); these only map HTTP.

// receivedFolder reads GET /v1/received's folder: "" or "inbox" (the
// messages outside the quarantine) or "quarantine".
func receivedFolder(v string) (string, error) {
	switch v {
	case "", core.FolderInbox:
		return "", nil
	case core.FolderQuarantine:
		return core.FolderQuarantine, nil
	}
	return "", core.Errorf(core.CodeValidation, "folder", "folder must be inbox or quarantine")
}

// handleReleaseReceived is POST /v1/received/{id}/release: the message
// moves to the inbox, once; a repeat answers the message as it is.
func (s *Server) handleReleaseReceived(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	m, err := s.svc.ReleaseReceived(ctx, tx, key, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewReceived(m, false), nil
}

// handleDeleteReceived is DELETE /v1/received/{id}.
func (s *Server) handleDeleteReceived(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.svc.DeleteReceived(r.Context(), apiKeyFrom(r.Context()), id); err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "received_message", "deleted": true})
}
