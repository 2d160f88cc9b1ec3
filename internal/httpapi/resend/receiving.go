package resend

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/message"
)

// Resend's receiving routes (docs/receiving.md): received messages as
// Resend's SDK reads them (emails.receiving.*).

func (s *API) ListReceiving(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	limit, err := kit.ParseLimit(r.URL.Query().Get("limit"))
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	ms, more, err := s.Svc.ListReceived(r.Context(), key, core.ReceivedFilter{Limit: limit, After: r.URL.Query().Get("after")})
	s.AnswerResend(w, r, kit.ResendList[kit.ResendReceivedView]{Object: "list", HasMore: more, Data: kit.Views(ms, kit.ViewResendReceived)}, err)
}

func (s *API) GetReceiving(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	m, err := s.Svc.ReceivedMessage(r.Context(), key, r.PathValue("id"))
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	v := kit.ViewResendReceived(m)
	v.Text, v.HTML = &m.Text, &m.HTML
	v.Headers = map[string]string{}
	for _, h := range m.Headers {
		if _, ok := v.Headers[h.Name]; !ok {
			v.Headers[h.Name] = h.Value
		}
	}
	u, exp, err := s.DownloadURL(r.Context(), r, m, "")
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	v.Raw = &kit.ResendDownload{DownloadURL: u, ExpiresAt: kit.RFC3339(exp)}
	s.AuditRead(r, key, m.ID)
	kit.WriteJSON(w, http.StatusOK, v)
}

func (s *API) ReceivingAttachments(w http.ResponseWriter, r *http.Request) {
	atts, ok := s.receivedAttachments(w, r, func(string) bool { return true })
	if !ok {
		return
	}
	kit.WriteJSON(w, http.StatusOK, kit.ResendList[kit.ResendInboundAttView]{Object: "list", Data: atts})
}

func (s *API) ReceivingAttachment(w http.ResponseWriter, r *http.Request) {
	atts, ok := s.receivedAttachments(w, r, func(id string) bool { return id == r.PathValue("attachment") })
	if !ok {
		return
	}
	if len(atts) == 0 {
		kit.WriteResendError(w, r, s.Logger, core.ErrNotFound)
		return
	}
	kit.WriteJSON(w, http.StatusOK, struct {
		Object string `json:"object"`
		kit.ResendInboundAttView
	}{"attachment", atts[0]})
}

// receivedAttachments is the attachments of the received message {id}
// that want picks, each with its download link (never null: [] when none),
// as the list and the one-attachment read both answer them; false when it
// wrote the error instead. An attachment want passes over gets no link.
func (s *API) receivedAttachments(w http.ResponseWriter, r *http.Request, want func(id string) bool) ([]kit.ResendInboundAttView, bool) {
	m, err := s.Svc.ReceivedMessage(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return nil, false
	}
	out := []kit.ResendInboundAttView{}
	for _, a := range kit.ViewResendReceived(m).Attachments {
		if !want(a.ID) {
			continue
		}
		if a.DownloadURL, a.ExpiresAt, err = s.attachmentURL(r, m, a.ID); err != nil {
			kit.WriteResendError(w, r, s.Logger, err)
			return nil, false
		}
		out = append(out, a)
	}
	return out, true
}

func (s *API) attachmentURL(r *http.Request, m *core.ReceivedMessage, id string) (string, string, error) {
	u, exp, err := s.DownloadURL(r.Context(), r, m, id)
	return u, kit.RFC3339(exp), err
}

// handleDownloadReceived serves a signed download link: the raw message,
// or one attachment's bytes. The token is the authorization (Resend's
// SDK fetches the link without a key); a wrong or expired one is a 404.
func (s *API) DownloadReceived(w http.ResponseWriter, r *http.Request) {
	id, part := r.PathValue("id"), r.PathValue("attachment")
	tenant, err := s.Svc.CheckDownload(r.Context(), r.URL.Query().Get("token"), id, part)
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	raw, err := s.Svc.ReceivedRawFor(r.Context(), tenant, id)
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	ctype, body, disp := "message/rfc822", raw, message.AttachmentDisposition(id+".eml")
	if part != "" {
		key := &core.APIKey{Tenant: tenant}
		att, b, err := s.Svc.ReceivedAttachment(r.Context(), key, id, part)
		if errors.Is(err, core.ErrNotFound) || err != nil {
			kit.WriteResendError(w, r, s.Logger, err)
			return
		}
		ctype, body, disp = att.ContentType, b, message.AttachmentDisposition(att.Filename)
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", disp)
	_, _ = w.Write(body)
}
