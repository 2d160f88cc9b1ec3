package httpapi

import (
	"context"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/metrics"
)

// The native send routes under /v1: send, read and list, scheduled sends
// (reschedule, cancel), and the operator's decisions on a send
// (reconcile, approve, reject).

func (s *Server) handleSend(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (writeStep, error) {
	var req sendRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	send, err := s.svc.PrepareSend(ctx, key, idemKey, req.toApp(req.MailboxID))
	if err != nil {
		return nil, err
	}
	return s.acceptStep(key, send), nil
}

// acceptStep is the write step of the send routes: record the prepared
// send (row, event, delivery job) and answer with it.
func (s *Server) acceptStep(key *core.APIKey, send *core.Send) writeStep {
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		if err := s.svc.AcceptSend(ctx, tx, key, send); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, viewSend(send), nil
	}
}

func (s *Server) handleGetSend(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	send, events, err := s.reads.SendWithEvents(r.Context(), key.Tenant, r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	v := viewSend(send)
	v.Events = make([]eventView, 0, len(events))
	for _, e := range events {
		v.Events = append(v.Events, eventView{ID: e.ID, Type: e.Type, At: rfc3339(e.At), Detail: e.Detail,
			Recipient: e.Recipient, Bounce: viewBounce(e.Bounce)})
	}
	writeJSON(w, http.StatusOK, v)
}

const (
	defaultListLimit = 20
	maxListLimit     = 100
)

func parseLimit(q string) (int, error) {
	if q == "" {
		return defaultListLimit, nil
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, core.Errorf(core.CodeValidation, "limit", "limit must be a whole number from 1 to %d", maxListLimit)
	}
	return n, nil
}

func (s *Server) handleListSends(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	f := core.SendFilter{IdempotencyKey: q.Get("idempotency_key"), Status: core.Status(q.Get("status")), Limit: limit, After: q.Get("after")}
	switch {
	case f.IdempotencyKey != "" && key.OwnsIdempotencyKeys():
		// A restricted key finds by key the sends of the keys whose
		// Idempotency-Keys share its namespace (core.StoredIdempotencyKey):
		// itself, and the keys with its limits it was rotated from.
		peers, err := s.svc.IdempotencyKeyPeers(r.Context(), key)
		if err != nil {
			writeError(w, r, s.logger, err)
			return
		}
		f.APIKeyIDs = peers
	case key.Agent:
		f.APIKeyID = key.ID // an agent lists only its own sends
	}
	if f.Status != "" && !f.Status.Valid() {
		writeError(w, r, s.logger, core.Errorf(core.CodeValidation, "status", "unknown status %q", f.Status))
		return
	}
	if err := listFilters(q, &f); err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	sends, next, err := s.reads.ListSends(r.Context(), key.Tenant, f)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	if f.IdempotencyKey != "" && len(sends) > 0 && r.Header.Get(IntentHeader) != "" && s.metrics != nil {
		// The MCP server's look before it sends, which found the intent's
		// send: a duplicate it did not make.
		s.metrics.DuplicatePrevented(metrics.ViaMCP)
	}
	out := listView[*sendView]{Object: "list", Data: make([]*sendView, 0, len(sends)), Next: optString(next)}
	for _, sd := range sends {
		out.Data = append(out.Data, viewSend(sd))
	}
	writeJSON(w, http.StatusOK, out)
}

// listFilters reads GET /v1/sends' recipient, tag (name:value) and
// created_after and created_before (RFC 3339) into f.
func listFilters(q url.Values, f *core.SendFilter) error {
	if v := q.Get("recipient"); v != "" {
		addr, err := recipientParam(v)
		if err != nil {
			return err
		}
		f.Recipient = addr
	}
	if tag := q.Get("tag"); tag != "" {
		name, value, ok := strings.Cut(tag, ":")
		if !ok || name == "" {
			return core.Errorf(core.CodeValidation, "tag", "tag must be name:value")
		}
		f.TagName, f.TagValue = name, value
	}
	for _, b := range []struct {
		param string
		dst   *time.Time
	}{{"created_after", &f.CreatedAfter}, {"created_before", &f.CreatedBefore}} {
		if v := q.Get(b.param); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return core.Errorf(core.CodeValidation, b.param, "%s must be an RFC 3339 time with an offset", b.param)
			}
			*b.dst = t
		}
	}
	return nil
}

// recipientParam is the address GET /v1/sends?recipient= looks up, as
// the recipient index keeps it: bare and lower case ("Ada <Ada@x.org>"
// finds what ada@x.org does).
func recipientParam(v string) (string, error) {
	if strings.ContainsAny(v, "\r\n") {
		return "", core.Errorf(core.CodeValidation, "recipient", "recipient must not contain CR or LF")
	}
	a, err := mail.ParseAddress(v)
	if err != nil {
		return "", core.Errorf(core.CodeValidation, "recipient", "recipient must be an email address")
	}
	return core.NormalizeAddress(a.Address), nil
}

func (s *Server) handleReconcile(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req struct {
		Outcome string `json:"outcome"`
	}
	if err := decodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	send, err := s.svc.Reconcile(ctx, tx, key.Tenant, r.PathValue("id"), req.Outcome)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewSend(send), nil
}

func (s *Server) handleApprove(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	send, err := s.svc.Approve(ctx, tx, key.Tenant, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewSend(send), nil
}

func (s *Server) handleReject(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	send, err := s.svc.Reject(ctx, tx, key.Tenant, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewSend(send), nil
}

func (s *Server) handleCancel(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	send, err := s.svc.Cancel(ctx, tx, key, r.PathValue("id"))
	return answerSend(send, err, nativeSendView)
}

// scheduleRequest is the body of PATCH /v1/sends/{id} and PATCH
// /emails/{id}.
type scheduleRequest struct {
	ScheduledAt string `json:"scheduled_at"`
}

func (s *Server) handleReschedule(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	send, err := s.reschedule(ctx, tx, key, r, body)
	return answerSend(send, err, nativeSendView)
}

// reschedule is the change behind PATCH /v1/sends/{id} and Resend's PATCH
// /emails/{id}: they differ only in the answer's shape.
func (s *Server) reschedule(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (*core.Send, error) {
	var req scheduleRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	return s.svc.Reschedule(ctx, tx, key, r.PathValue("id"), req.ScheduledAt)
}

// answerSend answers a change of one send (cancel, reschedule) with view
// of the changed send, in the surface's shape, or with its error.
func answerSend(send *core.Send, err error, view func(*core.Send) any) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, view(send), nil
}

// nativeSendView is the native API's answer to a change: the send object.
func nativeSendView(send *core.Send) any { return viewSend(send) }
