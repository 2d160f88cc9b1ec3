package kit

import (
	"context"
	"net/http"
	"strconv"

	"github.com/sendonce/sendonce/internal/core"
)

// AcceptStep is the write step of the send routes: record the prepared
// send (row, event, delivery job) and answer with view of it, in the
// surface's shape (NativeSendView on /v1).
func (s *Base) AcceptStep(key *core.APIKey, send *core.Send, view func(*core.Send) any) WriteStep {
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		if err := s.Svc.AcceptSend(ctx, tx, key, send); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, view(send), nil
	}
}

func ParseLimit(q string) (int, error) {
	if q == "" {
		return defaultListLimit, nil
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, core.Errorf(core.CodeValidation, "limit", "limit must be a whole number from 1 to %d", maxListLimit)
	}
	return n, nil
}

// scheduleRequest is the body of PATCH /v1/sends/{id} and PATCH
// /emails/{id}.
type scheduleRequest struct {
	ScheduledAt string `json:"scheduled_at"`
}

// Reschedule is the change behind PATCH /v1/sends/{id} and Resend's PATCH
// /emails/{id}: they differ only in the answer's shape.
func (s *Base) Reschedule(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (*core.Send, error) {
	var req scheduleRequest
	if err := DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	return s.Svc.Reschedule(ctx, tx, key, r.PathValue("id"), req.ScheduledAt)
}

// AnswerSend answers a change of one send (cancel, reschedule) with view
// of the changed send, in the surface's shape, or with its error.
func AnswerSend(send *core.Send, err error, view func(*core.Send) any) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, view(send), nil
}

// NativeSendView is the native API's answer to a change: the send object.
func NativeSendView(send *core.Send) any { return ViewSend(send) }

const (
	defaultListLimit = 20
	maxListLimit     = 100
)
