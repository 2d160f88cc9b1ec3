package kit

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
	bad := ApiError(core.CodeValidation, IntentHeader, IntentHeader+" must be given once: one JSON object of at most "+
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
func (s *Base) writeAudit(r *http.Request, key *core.APIKey, intent string, res Result) {
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
	if err := s.Svc.RecordAudit(ctx, e); err != nil {
		s.Logger.ErrorContext(ctx, "write audit entry", slog.Any("error", err))
	}
}
