package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/webhook"
)

// /v1/webhooks and Resend's /webhooks (docs/webhooks.md) share
// their handlers and shapes — sendonce's webhook object is Resend's with
// more fields, a list carries both Resend's has_more and the native next —
// and differ in their auth and error bodies (routes.go passes the style)
// and in create's status (201 natively, 200 as Resend answers).

type webhookView struct {
	ID             string   `json:"id"`
	Object         string   `json:"object"`
	Endpoint       string   `json:"endpoint"`
	Events         []string `json:"events"`
	Status         string   `json:"status"`
	CreatedAt      string   `json:"created_at"`
	SigningSecret  string   `json:"signing_secret,omitempty"` // create and rotate only
	DisabledReason string   `json:"disabled_reason,omitempty"`
}

func viewWebhook(w *core.Webhook, secret string) webhookView {
	return webhookView{ID: w.ID, Object: "webhook", Endpoint: w.Endpoint, Events: kit.NonNil(w.Events), Status: string(w.Status),
		CreatedAt: kit.RFC3339(w.CreatedAt), SigningSecret: secret, DisabledReason: w.DisabledReason}
}

// viewStoredWebhook is a webhook as reads and updates show it: its secret
// is shown only by the create and rotate that make it.
func viewStoredWebhook(w *core.Webhook) webhookView { return viewWebhook(w, "") }

type deliveryView struct {
	ID            string          `json:"id"` // the event's id, the webhook-id header
	Object        string          `json:"object"`
	Type          string          `json:"type"`
	EmailID       string          `json:"email_id"`
	CreatedAt     string          `json:"created_at"`
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt *string         `json:"next_attempt_at"`
	Payload       json.RawMessage `json:"payload,omitempty"` // GET of one only
}

func viewDelivery(d *core.WebhookDelivery, withPayload bool) deliveryView {
	typ, _ := core.WebhookType(d.Event)
	v := deliveryView{ID: d.EventID, Object: "webhook_event", Type: typ, EmailID: d.SendID, CreatedAt: kit.RFC3339(d.CreatedAt),
		Status: string(d.Status), Attempts: d.Tries, NextAttemptAt: kit.OptTime(d.NextAttemptAt)}
	if withPayload && d.Body != nil {
		v.Payload = d.Body
	}
	return v
}

type attemptView struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	HTTPStatusCode int    `json:"http_status_code"`
	Response       string `json:"response"`
	Error          string `json:"error,omitempty"`
	SentAt         string `json:"sent_at"`
	DurationMS     int64  `json:"duration_ms"`
}

// pageView is a list in both styles at once: Resend's has_more and the
// native next cursor.
type pageView[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	HasMore bool    `json:"has_more"`
	Next    *string `json:"next"`
}

func page[T any](data []T, more bool, id func(T) string) pageView[T] {
	v := pageView[T]{Object: "list", Data: kit.NonNil(data), HasMore: more}
	if more && len(data) > 0 {
		v.Next = kit.OptString(id(data[len(data)-1]))
	}
	return v
}

// answerFunc ends a route in a style's shape: kit.Base's Answer (native
// errors) or AnswerResend.
type answerFunc func(w http.ResponseWriter, r *http.Request, v any, err error)

func (s *Server) handleCreateWebhook(status int) kit.TxHandler {
	return func(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, _ string) (kit.WriteStep, error) {
		var req struct {
			Endpoint string   `json:"endpoint"`
			Events   []string `json:"events"`
		}
		if err := kit.DecodeStrict(body, &req); err != nil {
			return nil, err
		}
		hook, secret, err := s.Hooks.Prepare(ctx, key.Tenant, req.Endpoint, req.Events)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, tx core.Tx) (int, any, error) {
			if err := s.Svc.AddWebhook(ctx, tx, hook); err != nil {
				return 0, nil, err
			}
			return status, viewWebhook(hook, secret), nil
		}, nil
	}
}

func pageOf(r *http.Request) (core.WebhookPage, error) {
	limit, err := kit.ParseLimit(r.URL.Query().Get("limit"))
	return core.WebhookPage{Limit: limit, After: r.URL.Query().Get("after")}, err
}

func (s *Server) handleListWebhooks(answer answerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := pageOf(r)
		var hooks []*core.Webhook
		more := false
		if err == nil {
			hooks, more, err = s.Reads.ListWebhooks(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, p)
		}
		views := kit.Views(hooks, viewStoredWebhook)
		answer(w, r, page(views, more, func(v webhookView) string { return v.ID }), err)
	}
}

func (s *Server) handleGetWebhook(answer answerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h, err := s.Reads.Webhook(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
		answer(w, r, kit.Shown(h, err, viewStoredWebhook), err)
	}
}

func (s *Server) handleUpdateWebhook(answer answerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Endpoint *string   `json:"endpoint"`
			Events   *[]string `json:"events"`
			Status   *string   `json:"status"`
		}
		body, err := s.ReadBody(w, r)
		if err == nil {
			err = kit.DecodeStrict(body, &req)
		}
		p := webhook.Patch{Endpoint: req.Endpoint, Events: req.Events, Status: req.Status}
		if err == nil {
			err = s.Hooks.CheckPatch(r.Context(), &p)
		}
		var h *core.Webhook
		if err == nil {
			h, err = s.Hooks.Update(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"), p)
		}
		answer(w, r, kit.Shown(h, err, viewStoredWebhook), err)
	}
}

func (s *Server) handleDeleteWebhook(answer answerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		err := s.Hooks.Delete(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, id)
		answer(w, r, kit.ResendDeleted{Object: "webhook", ID: id, Deleted: true}, err)
	}
}

func (s *Server) handleRotateWebhook(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	h, secret, err := s.Hooks.RotateTx(ctx, tx, key.Tenant, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewWebhook(h, secret), nil
}

func (s *Server) handleListDeliveries(answer answerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := pageOf(r)
		var ds []*core.WebhookDelivery
		more := false
		if err == nil {
			ds, more, err = s.Reads.ListWebhookDeliveries(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, r.PathValue("id"), p)
		}
		views := kit.Views(ds, func(d *core.WebhookDelivery) deliveryView { return viewDelivery(d, false) })
		answer(w, r, page(views, more, func(v deliveryView) string { return v.ID }), err)
	}
}

// deliveryRef is the delivery a …/webhooks/{id}/events/{event_id}
// route names, of the caller's tenant.
func deliveryRef(r *http.Request) core.WebhookDeliveryRef {
	return core.WebhookDeliveryRef{Tenant: kit.APIKeyFrom(r.Context()).Tenant, WebhookID: r.PathValue("id"), EventID: r.PathValue("event_id")}
}

func (s *Server) handleGetDelivery(answer answerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d, err := s.Reads.WebhookDelivery(r.Context(), deliveryRef(r))
		answer(w, r, kit.Shown(d, err, func(d *core.WebhookDelivery) deliveryView { return viewDelivery(d, true) }), err)
	}
}

func (s *Server) handleListAttempts(answer answerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := pageOf(r)
		var as []*core.WebhookAttempt
		more := false
		if err == nil {
			as, more, err = s.Reads.ListWebhookAttempts(r.Context(), deliveryRef(r), p)
		}
		admin := kit.APIKeyFrom(r.Context()).Has(core.ScopeAdmin)
		views := kit.Views(as, func(a *core.WebhookAttempt) attemptView {
			return attemptView{ID: a.ID, Object: "webhook_attempt", HTTPStatusCode: a.HTTPStatus, Response: attemptResponse(a, admin),
				Error: a.Error, SentAt: kit.RFC3339(a.At), DurationMS: a.Duration.Milliseconds()}
		})
		answer(w, r, page(views, more, func(v attemptView) string { return v.ID }), err)
	}
}

func (s *Server) handleReplayDelivery(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, _ []byte) (int, any, error) {
	id := r.PathValue("event_id")
	if err := s.Hooks.ReplayTx(ctx, tx, key.Tenant, r.PathValue("id"), id); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]string{"object": "webhook_event", "id": id, "status": string(core.DeliveryPending)}, nil
}

// attemptResponse is the start of an attempt's response body as shown to
// a key: to admin keys only, since an endpoint may answer with anything
// (a session, an internal page) that read keys should not see; at most
// webhook.MaxResponse bytes, also of attempts kept when more was.
func attemptResponse(a *core.WebhookAttempt, admin bool) string {
	if !admin {
		return ""
	}
	if len(a.Response) > webhook.MaxResponse {
		return strings.ToValidUTF8(a.Response[:webhook.MaxResponse], "")
	}
	return a.Response
}
