package httpapi

import (
	"context"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/metrics"
)

// The native send routes under /v1: send, read and list, scheduled sends
// (reschedule, cancel), and the operator's decisions on a send
// (reconcile, approve, reject).

func (s *Server) handleSend(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (kit.WriteStep, error) {
	var req kit.SendRequest
	if err := kit.DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	send, err := s.Svc.PrepareSend(ctx, key, idemKey, req.ToApp(req.MailboxID))
	if err != nil {
		return nil, err
	}
	return s.AcceptStep(key, send, kit.NativeSendView), nil
}

func (s *Server) handleGetSend(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	send, events, err := s.Reads.SendWithEvents(r.Context(), key.Tenant, r.PathValue("id"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	v := kit.ViewSend(send)
	v.Events = make([]kit.EventView, 0, len(events))
	for _, e := range events {
		v.Events = append(v.Events, kit.EventView{ID: e.ID, Type: e.Type, At: kit.RFC3339(e.At), Detail: e.Detail,
			Recipient: e.Recipient, Bounce: kit.ViewBounce(e.Bounce)})
	}
	kit.WriteJSON(w, http.StatusOK, v)
}

func (s *Server) handleListSends(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	q := r.URL.Query()
	limit, err := kit.ParseLimit(q.Get("limit"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	f := core.SendFilter{IdempotencyKey: q.Get("idempotency_key"), Status: core.Status(q.Get("status")), Limit: limit, After: q.Get("after")}
	switch {
	case f.IdempotencyKey != "" && key.OwnsIdempotencyKeys():
		// A restricted key finds by key the sends of the keys whose
		// Idempotency-Keys share its namespace (core.StoredIdempotencyKey):
		// itself, and the keys with its limits it was rotated from.
		peers, err := s.Svc.IdempotencyKeyPeers(r.Context(), key)
		if err != nil {
			kit.WriteError(w, r, s.Logger, err)
			return
		}
		f.APIKeyIDs = peers
	case key.Agent:
		f.APIKeyID = key.ID // an agent lists only its own sends
	}
	if f.Status != "" && !f.Status.Valid() {
		kit.WriteError(w, r, s.Logger, core.Errorf(core.CodeValidation, "status", "unknown status %q", f.Status))
		return
	}
	if err := listFilters(q, &f); err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	sends, next, err := s.Reads.ListSends(r.Context(), key.Tenant, f)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	if f.IdempotencyKey != "" && len(sends) > 0 && r.Header.Get(kit.IntentHeader) != "" && s.Metrics != nil {
		// The MCP server's look before it sends, which found the intent's
		// send: a duplicate it did not make.
		s.Metrics.DuplicatePrevented(metrics.ViaMCP)
	}
	out := kit.ListView[*kit.SendView]{Object: "list", Data: kit.Views(sends, kit.ViewSend), Next: kit.OptString(next)}
	kit.WriteJSON(w, http.StatusOK, out)
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
	if err := kit.DecodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	send, err := s.Svc.Reconcile(ctx, tx, key.Tenant, r.PathValue("id"), req.Outcome)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, kit.ViewSend(send), nil
}

func (s *Server) handleApprove(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	send, err := s.Svc.Approve(ctx, tx, key.Tenant, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, kit.ViewSend(send), nil
}

// elicitationRequest is the body of POST /v1/sends/{id}/elicitation.
type elicitationRequest struct {
	Action string `json:"action"`
}

func (s *Server) handleElicitation(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req elicitationRequest
	if err := kit.DecodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	send, err := s.Svc.DecideByElicitation(ctx, tx, key, r.PathValue("id"), req.Action)
	return kit.AnswerSend(send, err, kit.NativeSendView)
}

func (s *Server) handleReject(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	send, err := s.Svc.Reject(ctx, tx, key.Tenant, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, kit.ViewSend(send), nil
}

func (s *Server) handleCancel(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	send, err := s.Svc.Cancel(ctx, tx, key, r.PathValue("id"))
	return kit.AnswerSend(send, err, kit.NativeSendView)
}

func (s *Server) handleReschedule(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	send, err := s.Reschedule(ctx, tx, key, r, body)
	return kit.AnswerSend(send, err, kit.NativeSendView)
}
