package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// IntentHeader carries an agent's intent on POST /v1/send: the canonical
// JSON the MCP server derived the Idempotency-Key from. The server does not
// trust it for anything; it writes it to the audit log. On the MCP
// server's lookup by key (GET /v1/sends?idempotency_key=) it marks the look
// before a send, and a send found counts as a duplicate prevented
// (via="mcp"): a client that sets it only moves that counter.
const IntentHeader = "Sendonce-Intent"

// maxIntentLen bounds the intent header.
const maxIntentLen = 2048

// intentFrom reads the intent header: absent is "", else one JSON object of
// at most maxIntentLen bytes with no control characters (CR and LF
// included).
func intentFrom(h http.Header) (string, error) {
	vs := h.Values(IntentHeader)
	if len(vs) == 0 {
		return "", nil
	}
	bad := apiError(core.CodeValidation, IntentHeader, IntentHeader+" must be given once: one JSON object of at most "+
		strconv.Itoa(maxIntentLen)+" bytes without control characters")
	v := vs[0]
	if len(vs) > 1 || v == "" || len(v) > maxIntentLen {
		return "", bad
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] == 0x7f {
			return "", bad
		}
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(v), &obj); err != nil || obj == nil {
		return "", bad
	}
	return v, nil
}

// writeAudit writes an audited request's entry with its result, whatever
// it is (accepted, replayed, refused by a guardrail, invalid), after the
// response is decided (app.RecordAudit).
func (s *Server) writeAudit(r *http.Request, key *core.APIKey, intent string, res result) {
	res = res.withAnswer()
	e := &core.AuditEntry{
		Tenant: key.Tenant, APIKeyID: key.ID, Route: r.Method + " " + r.URL.Path,
		Intent: intent, IdempotencyKey: res.idemKey, Status: res.status, SendID: strings.Join(res.sendIDs, ","),
	}
	switch {
	case res.status >= 200 && res.status < 300:
		e.Outcome = "created"
		if res.outcome == idempotency.Replay {
			e.Outcome = "replayed"
		}
	case res.status >= 500:
		e.Outcome, e.Code = "error", res.code
	default:
		e.Outcome, e.Code, e.Detail = "refused", res.code, res.message
	}
	ctx := context.WithoutCancel(r.Context())
	if err := s.svc.RecordAudit(ctx, e); err != nil {
		s.logger.ErrorContext(ctx, "write audit entry", slog.Any("error", err))
	}
}

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
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	entries, next, err := s.reads.ListAudit(r.Context(), apiKeyFrom(r.Context()).Tenant, limit, q.Get("after"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listView[auditView]{Object: "list", Data: []auditView{}, Next: optString(next)}
	for _, e := range entries {
		intent := json.RawMessage("null")
		if e.Intent != "" && json.Valid([]byte(e.Intent)) {
			intent = json.RawMessage(e.Intent)
		}
		out.Data = append(out.Data, auditView{
			ID: e.ID, Object: "audit_entry", At: rfc3339(e.At), APIKeyID: e.APIKeyID, Route: e.Route, Intent: intent,
			IdempotencyKey: optString(e.IdempotencyKey), Status: e.Status, Outcome: e.Outcome, Code: optString(e.Code),
			SendID: optString(e.SendID), Detail: optString(e.Detail),
		})
	}
	writeJSON(w, http.StatusOK, out)
}

type previewView struct {
	Object          string   `json:"object"`
	MailboxID       string   `json:"mailbox_id"`
	From            string   `json:"from"`
	To              []string `json:"to"`
	Cc              []string `json:"cc"`
	Bcc             []string `json:"bcc"`
	ReplyTo         []string `json:"reply_to"`
	Subject         string   `json:"subject"`
	Text            string   `json:"text"`
	HTML            string   `json:"html"`
	TemplateID      *string  `json:"template_id"`
	RequireApproval bool     `json:"requires_approval"`
}

// handlePreviewSend is POST /v1/send/preview (scope send): the message
// POST /v1/send would accept for this body and key, rendered, or the error
// it would answer (caps aside). It writes nothing and needs no
// Idempotency-Key.
func (s *Server) handlePreviewSend(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	var req sendRequest
	if err := decodeStrict(body, &req); err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	send, err := s.svc.PreviewSend(r.Context(), key, req.toApp(req.MailboxID))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, previewView{
		Object: "send_preview", MailboxID: send.MailboxID, From: send.From, To: list(send.To), Cc: list(send.Cc),
		Bcc: list(send.Bcc), ReplyTo: list(send.ReplyTo), Subject: send.Subject, Text: send.Text, HTML: send.HTML,
		TemplateID: optString(send.TemplateID), RequireApproval: key.RequiresApproval,
	})
}
