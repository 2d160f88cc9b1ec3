package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// The reputation guard's routes (docs/api.md, "Reputation"): the key's
// tenant's bulk stream, its state and rates, and its resume.

// handleGetReputation answers GET /v1/reputation with app.Reputation's
// shape as it is: {"state", "complaint_rate", "bounce_rate",
// "window_sends", "thresholds": {…}}.
func (s *Server) handleGetReputation(w http.ResponseWriter, r *http.Request) {
	rep, err := s.Svc.Reputation(r.Context(), kit.APIKeyFrom(r.Context()).Tenant)
	s.Answer(w, r, rep, err)
}

// handleResumeReputation is POST /v1/reputation/resume: the tenant's
// bulk stream resumes (a stream that is not paused stays as it is), in
// the transaction that stores the Idempotency-Key's answer.
func (s *Server) handleResumeReputation(ctx context.Context, tx core.Tx, key *core.APIKey, _ *http.Request, _ []byte) (int, any, error) {
	rep, err := s.Svc.ResumeStreamTx(ctx, tx, key.Tenant)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rep, nil
}
