package httpapi

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
)

// The native template routes, /v1/templates.

func (s *Server) handlePutTemplate(w http.ResponseWriter, r *http.Request) {
	key := APIKeyFrom(r.Context())
	body, err := s.ReadBody(w, r)
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	var req struct {
		Subject string `json:"subject"`
		Text    string `json:"text"`
		HTML    string `json:"html"`
	}
	if err := DecodeStrict(body, &req); err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	t := &core.Template{Tenant: key.Tenant, ID: r.PathValue("id"), Subject: req.Subject, Text: req.Text, HTML: req.HTML}
	created, err := s.Svc.SaveTemplate(r.Context(), t)
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	stored, err := s.Reads.Template(r.Context(), key.Tenant, t.ID)
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	WriteJSON(w, status, ViewTemplate(stored))
}

func (s *Server) handleGetTemplate(w http.ResponseWriter, r *http.Request) {
	t, err := s.Reads.Template(r.Context(), APIKeyFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	WriteJSON(w, http.StatusOK, ViewTemplate(t))
}

func (s *Server) handleListTemplates(w http.ResponseWriter, r *http.Request) {
	ts, err := s.Reads.ListTemplates(r.Context(), APIKeyFrom(r.Context()).Tenant)
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	out := ListView[TemplateView]{Object: "list", Data: []TemplateView{}}
	for _, t := range ts {
		out.Data = append(out.Data, ViewTemplate(t))
	}
	WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleDeleteTemplate(w http.ResponseWriter, r *http.Request) {
	key := APIKeyFrom(r.Context())
	id := r.PathValue("id")
	if err := s.Svc.DeleteTemplate(r.Context(), key.Tenant, id); err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"id": id, "object": "template", "deleted": true})
}
