package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/metrics"
)

// addrList accepts a single address or an array of them.
type addrList []string

// checkRecipientCounts refuses a field of more than app.MaxRecipients
// addresses before anything else reads the request (the compatibility
// routes resolve templates first, which a huge list should not reach).
func checkRecipientCounts(to, cc, bcc, replyTo addrList) error {
	for _, f := range []struct {
		name string
		list addrList
	}{{"to", to}, {"cc", cc}, {"bcc", bcc}, {"reply_to", replyTo}} {
		if len(f.list) > app.MaxRecipients {
			return core.Errorf(core.CodeValidation, f.name, "at most %d addresses", app.MaxRecipients)
		}
	}
	return nil
}

func (a *addrList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*a = nil
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = addrList{s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		// A type error, so that the decoder names the field it happened in
		// and decodeStrict reports it as the param.
		return &json.UnmarshalTypeError{Value: jsonValueKind(b), Type: addrListType}
	}
	*a = l
	return nil
}

var addrListType = reflect.TypeFor[addrList]()

// jsonValueKind names the kind of a JSON value for an error message.
func jsonValueKind(b []byte) string {
	if len(b) == 0 {
		return "value"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

type sendRequest struct {
	To         addrList          `json:"to"`
	Cc         addrList          `json:"cc"`
	Bcc        addrList          `json:"bcc"`
	ReplyTo    addrList          `json:"reply_to"`
	From       string            `json:"from"`
	MailboxID  string            `json:"mailbox_id"`
	Subject    string            `json:"subject"`
	Text       string            `json:"text"`
	HTML       string            `json:"html"`
	TemplateID string            `json:"template_id"`
	Variables  map[string]any    `json:"variables"`
	Headers    map[string]string `json:"headers"`
	Tags       map[string]string `json:"tags"`
	// Attachments and ScheduledAt: docs/api.md, "Attachments" and "Scheduled sends".
	Attachments []attachmentJSON `json:"attachments"`
	ScheduledAt string           `json:"scheduled_at"`
}

// toApp is the request as the application takes it (the one mapping of
// the native body; app checks every field, the recipient counts
// included). mailboxID is the body's, or the path's on the Mailera route.
func (req *sendRequest) toApp(mailboxID string) *app.SendRequest {
	return &app.SendRequest{
		To: req.To, Cc: req.Cc, Bcc: req.Bcc, ReplyTo: req.ReplyTo, From: req.From, MailboxID: mailboxID,
		Subject: req.Subject, Text: req.Text, HTML: req.HTML, TemplateID: req.TemplateID, Variables: req.Variables,
		Headers: req.Headers, Tags: req.Tags, Attachments: appAttachments(req.Attachments), ScheduledAt: req.ScheduledAt,
	}
}

// decodeStrict decodes a JSON object into v. Unknown fields are refused
// (422), so that a misspelt field ("suject") is not silently dropped.
func decodeStrict(body []byte, v any) error {
	if len(body) >= largeJSON {
		return decodeLarge(body, v)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	return decodeError(dec, err)
}

// decodeError maps a strict decode's outcome to the API's errors.
func decodeError(dec *json.Decoder, err error) error {
	if err == nil {
		if dec.More() {
			return apiError(core.CodeInvalidJSON, "", "the request body must be a single JSON object")
		}
		return nil
	}
	var (
		typeErr *json.UnmarshalTypeError
		synErr  *json.SyntaxError
	)
	switch {
	case errors.As(err, &synErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return apiError(core.CodeInvalidJSON, "", "the request body is not valid JSON")
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return apiError(core.CodeValidation, "", "the request body must be a JSON object")
		}
		if typeErr.Type == addrListType {
			return apiError(core.CodeValidation, typeErr.Field, typeErr.Field+" must be a string or an array of strings")
		}
		return apiError(core.CodeValidation, typeErr.Field, fmt.Sprintf("%s must be of type %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String())))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return apiError(core.CodeValidation, name, fmt.Sprintf("unknown field %q", name))
	}
	// Errors from a field's own UnmarshalJSON (addrList) land here.
	return apiError(core.CodeValidation, "", "invalid request: "+err.Error())
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "map", "struct":
		return "object"
	case "slice", "array":
		return "array"
	case "bool":
		return "boolean"
	}
	return "number"
}

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
	if key.Agent {
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
		s.metrics.DuplicatesPrevented.WithLabelValues(metrics.ViaMCP).Inc()
	}
	out := listView[*sendView]{Object: "list", Data: make([]*sendView, 0, len(sends)), Next: optString(next)}
	for _, sd := range sends {
		out.Data = append(out.Data, viewSend(sd))
	}
	writeJSON(w, http.StatusOK, out)
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

func (s *Server) handlePutTemplate(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	var req struct {
		Subject string `json:"subject"`
		Text    string `json:"text"`
		HTML    string `json:"html"`
	}
	if err := decodeStrict(body, &req); err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	t := &core.Template{Tenant: key.Tenant, ID: r.PathValue("id"), Subject: req.Subject, Text: req.Text, HTML: req.HTML}
	created, err := s.svc.SaveTemplate(r.Context(), t)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	stored, err := s.reads.Template(r.Context(), key.Tenant, t.ID)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, viewTemplate(stored))
}

func (s *Server) handleGetTemplate(w http.ResponseWriter, r *http.Request) {
	t, err := s.reads.Template(r.Context(), apiKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, viewTemplate(t))
}

func (s *Server) handleListTemplates(w http.ResponseWriter, r *http.Request) {
	ts, err := s.reads.ListTemplates(r.Context(), apiKeyFrom(r.Context()).Tenant)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listView[templateView]{Object: "list", Data: []templateView{}}
	for _, t := range ts {
		out.Data = append(out.Data, viewTemplate(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDeleteTemplate(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	id := r.PathValue("id")
	if err := s.svc.DeleteTemplate(r.Context(), key.Tenant, id); err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "template", "deleted": true})
}

func (s *Server) handleCreateMailbox(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error) {
	var req struct {
		ID          string `json:"id"`
		Address     string `json:"address"`
		Name        string `json:"name"`
		Transport   string `json:"transport"`
		ReceiveOnly bool   `json:"receive_only"`
	}
	if err := decodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	m := &core.Mailbox{Tenant: key.Tenant, ID: req.ID, Address: req.Address, Name: req.Name, Transport: req.Transport, ReceiveOnly: req.ReceiveOnly}
	if err := s.svc.CreateMailbox(ctx, tx, m); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, viewMailbox(m), nil
}

func (s *Server) handleGetMailbox(w http.ResponseWriter, r *http.Request) {
	m, err := s.svc.Mailbox(r.Context(), apiKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, viewMailbox(m))
}

func (s *Server) handleListMailboxes(w http.ResponseWriter, r *http.Request) {
	tenant := apiKeyFrom(r.Context()).Tenant
	ms, err := s.reads.ListMailboxes(r.Context(), tenant)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	def, err := s.svc.Mailbox(r.Context(), tenant, core.DefaultMailboxID)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listView[mailboxView]{Object: "list", Data: []mailboxView{viewMailbox(def)}}
	for _, m := range ms {
		if m.ID != core.DefaultMailboxID {
			out.Data = append(out.Data, viewMailbox(m))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleListInbox(w http.ResponseWriter, r *http.Request) {
	limit, err := parseLimit(r.URL.Query().Get("limit"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	ms, err := s.reads.ListInbox(r.Context(), apiKeyFrom(r.Context()).Tenant, limit)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listView[inboxView]{Object: "list", Data: []inboxView{}}
	for _, m := range ms {
		out.Data = append(out.Data, viewInbox(m, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetInbox(w http.ResponseWriter, r *http.Request) {
	m, err := s.reads.InboxMessage(r.Context(), apiKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, viewInbox(m, true))
}

func (s *Server) handleGetInboxRaw(w http.ResponseWriter, r *http.Request) {
	m, err := s.reads.InboxMessage(r.Context(), apiKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeRaw(w, http.StatusOK, "message/rfc822", m.Raw)
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	if err := s.reads.Ping(r.Context()); err != nil {
		s.logger.ErrorContext(r.Context(), "health check", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": "unreachable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
}

// handleNotFound answers what no route matched, in the API's error shape:
// 405 with Allow when the path exists for other methods, else 404.
func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != notFoundPattern {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, r, s.logger, apiError(codeMethodNotAllow, "", fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)))
		return
	}
	writeError(w, r, s.logger, core.Errorf(core.CodeNotFound, "", "no route %s %s", r.Method, r.URL.Path))
}
