package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

type auditView struct {
	ID             string          `json:"id"`
	Object         string          `json:"object"`
	At             string          `json:"at"`
	APIKeyID       string          `json:"api_key_id"`
	Route          string          `json:"route"`
	Intent         json.RawMessage `json:"intent"`
	IdempotencyKey *string         `json:"idempotency_key"`
	Status         int             `json:"status"`
	Outcome        string          `json:"outcome"`
	Code           *string         `json:"code"`
	SendID         *string         `json:"send_id"`
	Detail         *string         `json:"detail"`
}

// handleListAudit is GET /v1/audit (admin): the tenant's audit log, newest
// first, ?limit=N&after=CURSOR.
func (s *Server) handleListAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := kit.ParseLimit(q.Get("limit"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	entries, next, err := s.Reads.ListAudit(r.Context(), kit.APIKeyFrom(r.Context()).Tenant, limit, q.Get("after"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	out := kit.ListView[auditView]{Object: "list", Data: []auditView{}, Next: kit.OptString(next)}
	for _, e := range entries {
		intent := json.RawMessage("null")
		if e.Intent != "" && json.Valid([]byte(e.Intent)) {
			intent = json.RawMessage(e.Intent)
		}
		out.Data = append(out.Data, auditView{
			ID: e.ID, Object: "audit_entry", At: kit.RFC3339(e.At), APIKeyID: e.APIKeyID, Route: e.Route, Intent: intent,
			IdempotencyKey: kit.OptString(e.IdempotencyKey), Status: e.Status, Outcome: e.Outcome, Code: kit.OptString(e.Code),
			SendID: kit.OptString(e.SendID), Detail: kit.OptString(e.Detail),
		})
	}
	kit.WriteJSON(w, http.StatusOK, out)
}

type previewView struct {
	Object string `json:"object"`
	kit.MessageHeads
	Text            string  `json:"text"`
	HTML            string  `json:"html"`
	TemplateID      *string `json:"template_id"`
	RequireApproval bool    `json:"requires_approval"`
}

// handlePreviewSend is POST /v1/send/preview (scope send): the message
// POST /v1/send would accept for this body and key, rendered, or the error
// it would answer (caps aside). It writes nothing and needs no
// Idempotency-Key.
func (s *Server) handlePreviewSend(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	body, err := s.ReadBody(w, r)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	var req kit.SendRequest
	if err := kit.DecodeStrict(body, &req); err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	send, err := s.Svc.PreviewSend(r.Context(), key, req.ToApp(req.MailboxID))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, previewView{
		Object: "send_preview", MessageHeads: kit.HeadsOf(send), Text: send.Text, HTML: send.HTML,
		TemplateID: kit.OptString(send.TemplateID), RequireApproval: key.RequiresApproval,
	})
}
